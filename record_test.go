package koe_test

import (
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
