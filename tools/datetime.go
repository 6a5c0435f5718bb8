package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	// The zone database inside the binary: a container without tzdata
	// still knows every IANA zone.
	_ "time/tzdata"
)

const datetimeName = "get_current_datetime"

type datetimeArgs struct {
	Timezone string `json:"timezone"`
}

var datetimeSchema = newSchema(map[string]property{
	"timezone": {
		Type: "string",
		Description: `IANA time zone name such as "Europe/Berlin", "America/New_York" or "UTC". ` +
			"Leave it out for the server's local time.",
	},
})

func newDatetime(opts Options) tool {
	now := opts.Now
	local := localZoneName()
	return tool{
		spec: agentSpec(datetimeName,
			"Returns the current date, weekday, time and UTC offset, in a given time zone or the server's local one.",
			datetimeSchema),
		run: func(_ context.Context, args string) (string, error) {
			var a datetimeArgs
			if err := datetimeSchema.decode(args, &a); err != nil {
				return "", err
			}
			return currentDatetime(now(), strings.TrimSpace(a.Timezone), local)
		},
	}
}

// currentDatetime writes t in zone (empty: t's own location), naming the
// zone; local names the server's zone when t's location is time.Local.
func currentDatetime(t time.Time, zone, local string) (string, error) {
	name := t.Location().String()
	if zone != "" {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return "", fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Berlin, America/New_York or UTC", clip(zone))
		}
		t, name = t.In(loc), zone
	}
	if t.Location() == time.Local {
		name = local
	}
	return t.Format("Monday, 2 January 2006, 15:04:05 MST") + " (" + name + ", UTC" + t.Format("-07:00") + ")", nil
}

// localZoneName names the zone time.Local was loaded from, found the way
// Go finds it (TZ, then /etc/localtime), so the model reads a place rather
// than "Local".
func localZoneName() string {
	if tz, ok := os.LookupEnv("TZ"); ok {
		tz = strings.TrimPrefix(tz, ":")
		switch {
		case tz == "" || tz == "UTC":
			return "UTC"
		case !filepath.IsAbs(tz):
			if _, err := time.LoadLocation(tz); err != nil {
				return "UTC" // what Go falls back to
			}
			return tz
		}
		// An absolute TZ is a zone file: named like /etc/localtime below.
		return zoneFromPath(tz)
	}
	return zoneFromPath("/etc/localtime")
}

// zoneFromPath names the zone of a zone file by where it lives (or links
// to) in a zoneinfo directory.
func zoneFromPath(path string) string {
	const unknown = "the server's local time zone"
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return unknown
	}
	_, zone, ok := strings.Cut(filepath.ToSlash(target), "/zoneinfo/")
	if !ok || zone == "" {
		return unknown
	}
	// Debian's posix/ and right/ trees hold the same zones.
	zone = strings.TrimPrefix(strings.TrimPrefix(zone, "posix/"), "right/")
	return zone
}
