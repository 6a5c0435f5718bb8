package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every line koe logs names the instance. The lines logged while the
// file is read carry KOE_INSTANCE's name, or the host name; the rest the
// configured one (the file's, KOE_INSTANCE over it).
func TestEveryLogLineNamesTheInstance(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skipf("no host name here: %v", err)
	}
	// A key in its old form makes Load log while the file is read.
	const conf = "instance: koe-file\ncoord_lease: 10s\nasr:\n  engine: none\ncharacter:\n  tts:\n    engine: none\n"
	for _, tc := range []struct {
		name      string
		env       map[string]string
		early     string // the name on the warning logged while the file is read
		late      string // the name on the lines after
		earlyLine string
	}{
		{"file", nil, host, "koe-file", "in its old form"},
		{"env over file", map[string]string{"KOE_INSTANCE": "koe-env"}, "koe-env", "koe-env", "in its old form"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := runInProcess(t, conf+"data_dir: "+filepath.ToSlash(t.TempDir())+"\n", func(key string) string { return tc.env[key] })
			if err := k.stop(); err != nil {
				t.Fatalf("run: %v", err)
			}
			stderr := k.log
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) < 3 || !strings.Contains(lines[0], tc.earlyLine) {
				t.Fatalf("want the old key's warning first, then koe's lines; log:\n%s", stderr.String())
			}
			if !strings.Contains(lines[0], " instance="+tc.early+" ") {
				t.Errorf("line logged while reading the file does not name %q: %s", tc.early, lines[0])
			}
			for _, line := range lines[1:] {
				if !strings.Contains(line, " instance="+tc.late) {
					t.Errorf("line does not name the instance %q: %s", tc.late, line)
				}
			}
		})
	}
}
