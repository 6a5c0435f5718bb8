package mcp

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// stderr is logged line by line, a long line in pieces, and the line that
// says what went wrong is kept for the error.
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
	_, _ = w.Write([]byte("tail without newline"))
	if w.last() != "ModuleNotFoundError: mcp" {
		t.Errorf("last after a long line and a partial one: %q", w.last())
	}
	w = &stderrLog{log: slog.New(newRecorder(t))}
	_, _ = w.Write([]byte("listening\nstill listening\npartial"))
	if w.last() != "still listening" {
		t.Errorf("no error line: last = %q, want the last full line", w.last())
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

// After a Node or Go crash the last line is noise; the error line is
// quoted, unless it is old news.
func TestStderrQuotesTheError(t *testing.T) {
	node := "node:internal/modules/cjs/loader:1228\n  throw err;\n  ^\n\nError: Cannot find module '/srv/index.js'\n    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)\n    at node:internal/main/run_main_module:28:49 {\n  code: 'MODULE_NOT_FOUND',\n  requireStack: []\n}\n\nNode.js v20.20.2\n"
	w := &stderrLog{log: slog.New(newRecorder(t))}
	_, _ = w.Write([]byte(node))
	if got := w.last(); got != "Error: Cannot find module '/srv/index.js'" {
		t.Errorf("node: %q", got)
	}
	_, _ = w.Write([]byte(strings.Repeat("serving request\n", recentError)))
	if got := w.last(); got != "serving request" {
		t.Errorf("an old error is still quoted: %q", got)
	}
}
