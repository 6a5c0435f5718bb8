package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/agent"
)

func TestDatetime(t *testing.T) {
	winter := time.Date(2026, 11, 23, 13, 5, 9, 0, time.UTC) // a Monday
	summer := time.Date(2026, 7, 4, 23, 30, 0, 0, time.UTC)  // a Saturday
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		now  time.Time
		args string
		want string
	}{
		{winter, `{"timezone":"Europe/Berlin"}`, "Monday, 23 November 2026, 14:05:09 CET (Europe/Berlin, UTC+01:00)"},
		{summer, `{"timezone":"Europe/Berlin"}`, "Sunday, 5 July 2026, 01:30:00 CEST (Europe/Berlin, UTC+02:00)"},
		{winter, `{"timezone":"America/New_York"}`, "Monday, 23 November 2026, 08:05:09 EST (America/New_York, UTC-05:00)"},
		{winter, `{"timezone":"Asia/Kolkata"}`, "Monday, 23 November 2026, 18:35:09 IST (Asia/Kolkata, UTC+05:30)"},
		{winter, `{"timezone":"America/St_Johns"}`, "Monday, 23 November 2026, 09:35:09 NST (America/St_Johns, UTC-03:30)"},
		{winter, `{"timezone":"Pacific/Kiritimati"}`, "Tuesday, 24 November 2026, 03:05:09 +14 (Pacific/Kiritimati, UTC+14:00)"},
		{winter, `{"timezone":"UTC"}`, "Monday, 23 November 2026, 13:05:09 UTC (UTC, UTC+00:00)"},
		{winter, `{"timezone":"  Asia/Tokyo "}`, "Monday, 23 November 2026, 22:05:09 JST (Asia/Tokyo, UTC+09:00)"},
		// No zone: the clock's own.
		{winter, ``, "Monday, 23 November 2026, 13:05:09 UTC (UTC, UTC+00:00)"},
		{winter, `{}`, "Monday, 23 November 2026, 13:05:09 UTC (UTC, UTC+00:00)"},
		{winter, `{"timezone":""}`, "Monday, 23 November 2026, 13:05:09 UTC (UTC, UTC+00:00)"},
		{winter, `{"timezone":null}`, "Monday, 23 November 2026, 13:05:09 UTC (UTC, UTC+00:00)"},
		{winter.In(berlin), `{}`, "Monday, 23 November 2026, 14:05:09 CET (Europe/Berlin, UTC+01:00)"},
		{winter.In(time.FixedZone("XYZ", -3*3600)), `{}`, "Monday, 23 November 2026, 10:05:09 XYZ (XYZ, UTC-03:00)"},
		{winter.In(berlin), `{"timezone":"UTC"}`, "Monday, 23 November 2026, 13:05:09 UTC (UTC, UTC+00:00)"},
	}
	for _, tt := range tests {
		b := newBox(t, []string{"get_current_datetime"}, Options{Now: func() time.Time { return tt.now }})
		got, err := b.Call(context.Background(), agent.ToolCall{Name: "get_current_datetime", Arguments: tt.args})
		if err != nil || got != tt.want {
			t.Errorf("at %v, %s: %q, %v; want %q", tt.now, tt.args, got, err, tt.want)
		}
	}
}

func TestDatetimeErrors(t *testing.T) {
	b := newBox(t, []string{"get_current_datetime"}, Options{})
	tests := []struct{ args, want string }{
		{`{"timezone":"Mars/Olympus_Mons"}`, `unknown time zone "Mars/Olympus_Mons": use an IANA name such as Europe/Berlin, America/New_York or UTC`},
		{`{"timezone":"CET+1"}`, `unknown time zone "CET+1"`},
		{`{"timezone":"../../etc/passwd"}`, `unknown time zone "../../etc/passwd"`},
		{`{"timezone":"/etc/localtime"}`, `unknown time zone "/etc/localtime"`},
		{`{"timezone":"Europe/Berlin\u0000"}`, `unknown time zone "Europe/Berlin\x00"`},
		{`{"timezone":"` + strings.Repeat("Z", 5000) + `"}`, `unknown time zone "ZZZZ`},
		{`{"timezone":1}`, `argument "timezone" must be a string, not a number`},
		{`{"timezone":"UTC","format":"iso"}`, `unknown argument "format" (expected "timezone": string, optional)`},
		{`{"tz":"UTC"}`, `unknown argument "tz"`},
		{`["UTC"]`, "the arguments must be a JSON object, not an array"},
		{`UTC`, "the arguments are not valid JSON"},
	}
	for _, tt := range tests {
		got, err := b.Call(context.Background(), agent.ToolCall{Name: "get_current_datetime", Arguments: tt.args})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %q, %v; want an error containing %q", clip(tt.args), got, err, tt.want)
			continue
		}
		if len(err.Error()) > maxErrorChars {
			t.Errorf("%s: error of %d bytes", clip(tt.args), len(err.Error()))
		}
	}
}

// The server's zone is named as a place, not as Go's "Local".
func TestDatetimeLocalZone(t *testing.T) {
	t.Setenv("TZ", "America/Denver")
	now := time.Date(2026, 11, 23, 13, 5, 9, 0, time.UTC)
	b := newBox(t, []string{"get_current_datetime"}, Options{Now: func() time.Time { return now.In(time.Local) }})
	got, err := b.Call(context.Background(), agent.ToolCall{Name: "get_current_datetime", Arguments: `{"timezone":"Local"}`})
	if err != nil || !strings.Contains(got, "(America/Denver, UTC") {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestLocalZoneName(t *testing.T) {
	for _, tt := range []struct{ tz, want string }{
		{"Europe/Paris", "Europe/Paris"},
		{":Asia/Tokyo", "Asia/Tokyo"},
		{"", "UTC"},
		{"UTC", "UTC"},
		{"Not/AZone", "UTC"}, // Go falls back to UTC too
	} {
		t.Setenv("TZ", tt.tz)
		if got := localZoneName(); got != tt.want {
			t.Errorf("TZ=%q: %q, want %q", tt.tz, got, tt.want)
		}
	}
}

func TestZoneFromPath(t *testing.T) {
	dir := t.TempDir()
	for _, zone := range []string{"zoneinfo/Europe/Paris", "zoneinfo/posix/Asia/Seoul", "elsewhere/zone"} {
		path := filepath.Join(dir, zone)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("TZif"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(name, target string) string {
		path := filepath.Join(dir, name)
		if err := os.Symlink(filepath.Join(dir, target), path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tt := range []struct{ path, want string }{
		{link("localtime", "zoneinfo/Europe/Paris"), "Europe/Paris"},
		{link("localtime2", "zoneinfo/posix/Asia/Seoul"), "Asia/Seoul"},
		{filepath.Join(dir, "zoneinfo/Europe/Paris"), "Europe/Paris"},
		{link("copied", "elsewhere/zone"), "the server's local time zone"},
		{filepath.Join(dir, "missing"), "the server's local time zone"},
	} {
		if got := zoneFromPath(tt.path); got != tt.want {
			t.Errorf("zoneFromPath(%s) = %q, want %q", tt.path, got, tt.want)
		}
	}
}
