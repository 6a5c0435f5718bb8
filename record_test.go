package koe_test

import (
	"errors"
	"fmt"
	"testing"

	"koe"
)

func TestStartsTurn(t *testing.T) {
	for _, c := range []struct {
		r    koe.Record
		want bool
	}{
		{koe.Record{Role: koe.RoleHuman}, true},
		{koe.Record{Role: koe.RoleSystem, Name: koe.NameProactive}, true},
		{koe.Record{Role: koe.RoleSystem}, false},
		{koe.Record{Role: koe.RoleAI}, false},
		{koe.Record{Role: koe.RoleMetadata}, false},
		{koe.Record{Role: koe.RoleToolCall}, false},
	} {
		if got := c.r.StartsTurn(); got != c.want {
			t.Errorf("%+v.StartsTurn() = %v", c.r, got)
		}
	}
}

func TestShown(t *testing.T) {
	for role, want := range map[string]bool{
		koe.RoleHuman: true, koe.RoleAI: true,
		koe.RoleMetadata: false, koe.RoleSystem: false, koe.RoleToolCall: false, koe.RoleTool: false, koe.RoleFile: false,
	} {
		if got := (koe.Record{Role: role}).Shown(); got != want {
			t.Errorf("a %s record: Shown() = %v, want %v", role, got, want)
		}
	}
}

func TestImageDecodeData(t *testing.T) {
	for _, tc := range []struct {
		data, want, err string
	}{
		{data: "aGk=", want: "hi"},
		{data: "data:image/png;base64,aGk=", want: "hi"},
		{data: "", err: "no data"},
		{data: "data:image/png;base64,", err: "no data"},
		{data: "data:image/png,aGk=", err: "data URL is not base64"},
		{data: "data:image/png;base64", err: "data URL is not base64"},
		{data: "not base64!", err: "data is not base64: illegal base64 data at input byte 3"},
	} {
		raw, err := koe.Image{Data: tc.data}.DecodeData()
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("DecodeData(%q) = %q, %v; want error %q", tc.data, raw, err, tc.err)
		case tc.err == "" && (err != nil || string(raw) != tc.want):
			t.Errorf("DecodeData(%q) = %q, %v; want %q", tc.data, raw, err, tc.want)
		}
	}
}

func TestCheckPageLimit(t *testing.T) {
	if err := koe.CheckPageLimit(1); err != nil {
		t.Errorf("limit 1: %v", err)
	}
	for _, limit := range []int{0, -1} {
		err := koe.CheckPageLimit(limit)
		if !errors.Is(err, koe.ErrInvalidPage) || err.Error() != fmt.Sprintf("limit %d, want at least 1: invalid page request", limit) {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
}
