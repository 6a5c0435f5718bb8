package recall

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// formatMemories are a block's worth of memories: three sessions of
// chat lines, some with line breaks and runs of spaces.
func formatMemories() []Memory {
	c := newChatter(23)
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.Local)
	var ms []Memory
	for i := range 24 {
		ms = append(ms, Memory{HistoryUID: fmt.Sprintf("h%d", i/8), Seq: uint64(i + 2), Name: []string{"Ann", "Mika"}[i%2],
			Time: at.Add(time.Duration(i/8) * 48 * time.Hour), Text: c.line() + "\n  " + c.line()})
	}
	return ms
}

// TestFormatWritesWhatItsPartsSay: the block format writes is the one
// header, lineOf and oneLine describe.
func TestFormatWritesWhatItsPartsSay(t *testing.T) {
	ms := formatMemories()
	ms = append(ms, Memory{HistoryUID: "undated", Name: "Ann", Text: "  no\ttime  "})
	want := blockIntro + "\n"
	for i, m := range ms {
		if i == 0 || !m.Time.Equal(ms[i-1].Time) || m.HistoryUID != ms[i-1].HistoryUID {
			want += header(m.Time)
		}
		want += lineOf(m.Name, oneLine(m.Text))
	}
	want = strings.TrimRight(want, "\n")
	if got := format(ms); got != want {
		t.Fatalf("format:\n%s\nwant:\n%s", got, want)
	}
}

// BenchmarkFormat formats a block of 24 memories, as a turn that recalls does.
func BenchmarkFormat(b *testing.B) {
	ms := formatMemories()
	b.ReportAllocs()
	for b.Loop() {
		_ = format(ms)
	}
}
