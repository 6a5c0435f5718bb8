package realtime_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// rtaIDPattern finds the ids koe makes (item_…, resp_…, event_…).
var rtaIDPattern = regexp.MustCompile(`\b(item|resp|event|sess|conv)_[0-9a-z]+`)

// rtaGolden compares the events read so far with testdata/name.golden: one
// line per event, its type and the fields that tell the sequence (ids
// numbered in order of appearance, deltas, transcripts and positions left
// out: the speech recogniser's words and the detector's milliseconds are
// checked by the tests themselves), runs of deltas as one line.
func rtaGolden(t *testing.T, name string, c *rtClient) {
	t.Helper()
	ids := map[string]string{}
	var lines []string
	for _, e := range c.got {
		typ := e.typ()
		if strings.HasSuffix(typ, ".delta") && len(lines) > 0 && strings.HasPrefix(lines[len(lines)-1], typ+" ") {
			continue
		}
		var fields []string
		for _, k := range []string{"item_id", "previous_item_id", "response_id", "response.id", "response.status", "response.status_details.reason", "item.id", "item.role", "item.status", "item.type", "output_index", "content_index"} {
			v := e.at(k)
			if v == nil {
				continue
			}
			s := fmt.Sprint(v)
			s = rtaIDPattern.ReplaceAllStringFunc(s, func(id string) string {
				if n, ok := ids[id]; ok {
					return n
				}
				kind := id[:strings.IndexByte(id, '_')]
				n := 0
				for _, v := range ids {
					if strings.HasPrefix(v, kind+"#") {
						n++
					}
				}
				ids[id] = fmt.Sprintf("%s#%d", kind, n+1)
				return ids[id]
			})
			fields = append(fields, k+"="+s)
		}
		sort.Strings(fields)
		lines = append(lines, strings.TrimSpace(typ+" "+strings.Join(fields, " ")))
	}
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./realtime -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("the events differ from %s (go test ./realtime -run %s -update rewrites it after an intended change)\ngot:\n%s\nwant:\n%s", path, t.Name(), got, want)
	}
}
