package mcp

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// stderr is logged line by line, a long line in pieces, and the last line
// is kept for the error.
func TestStderrLog(t *testing.T) {
	rec := newRecorder(t)
	w := &stderrLog{log: slog.New(rec)}
	for _, p := range []string{"Start", "ing…\r\n\n", "Traceback:\n  File x\nModuleNotFound", "Error: mcp\n"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if w.last() != "ModuleNotFoundError: mcp" {
		t.Errorf("last = %q", w.last())
	}
	var lines []string
	for _, r := range *rec.records {
		lines = append(lines, r.attrs["line"])
	}
	if want := []string{"Starting…", "Traceback:", "  File x", "ModuleNotFoundError: mcp"}; !slices.Equal(lines, want) {
		t.Errorf("logged %q, want %q", lines, want)
	}
	_, _ = w.Write([]byte(strings.Repeat("y", maxStderrLine+10)))
	if n := len(*rec.records); n != 5 || len((*rec.records)[4].attrs["line"]) != maxStderrLine {
		t.Errorf("a long line: %d records", n)
	}
	if w.last() != strings.Repeat("y", maxStderrLine) {
		t.Errorf("last after a long line: %d bytes", len(w.last()))
	}
	_, _ = w.Write([]byte("tail without newline"))
	if w.last() != strings.Repeat("y", maxStderrLine) {
		t.Errorf("a partial line replaced the last full one")
	}
	if (&stderrLog{partial: []byte("only partial ")}).last() != "only partial" {
		t.Error("a partial line alone is not reported")
	}
}

// A stdio server gets PATH and the like and its own env, not the rest of
// koe's environment.
func TestServerEnv(t *testing.T) {
	parent := map[string]string{"PATH": "/usr/bin", "HOME": "/home/k", "OPENAI_API_KEY": "sk-secret", "TZ": "UTC"}
	env := serverEnv(func(k string) string { return parent[k] }, map[string]string{"TZ": "Asia/Tokyo", "API_TOKEN": "t"})
	slices.Sort(env)
	want := []string{"API_TOKEN=t", "HOME=/home/k", "PATH=/usr/bin", "TZ=Asia/Tokyo"}
	if !slices.Equal(env, want) {
		t.Errorf("env = %q, want %q", env, want)
	}
}
