package koe_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"koe"
)

func TestValidID(t *testing.T) {
	cases := map[string]bool{
		"a":                      true,
		"conf_1.yaml":            true,
		"Shizuku-v2":             true,
		strings.Repeat("a", 128): true,
		"a.b.c":                  true,
		"x.":                     true,
		"":                       false,
		"../x":                   false,
		"a/b":                    false,
		strings.Repeat("a", 129): false,
		"\x00":                   false,
		".hidden":                false,
		"a..b":                   false,
		".":                      false,
		"a b":                    false,
		"a\\b":                   false,
		"ü":                      false,
		"a\n":                    false,
	}
	for id, want := range cases {
		if got := koe.ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestNewHistoryUID(t *testing.T) {
	re := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}_[0-9a-f]{32}$`)
	at := time.Date(2024, 12, 31, 23, 59, 58, 0, time.Local)
	a, b := koe.NewHistoryUID(at), koe.NewHistoryUID(at)
	for _, u := range []string{a, b} {
		if !re.MatchString(u) {
			t.Errorf("NewHistoryUID = %q, does not match %s", u, re)
		}
		if !strings.HasPrefix(u, "2024-12-31_23-59-58_") {
			t.Errorf("NewHistoryUID = %q, want prefix 2024-12-31_23-59-58_", u)
		}
		if !koe.ValidID(u) {
			t.Errorf("ValidID(NewHistoryUID) = false for %q", u)
		}
	}
	if a == b {
		t.Fatalf("two NewHistoryUID calls returned the same uid %q", a)
	}
}
