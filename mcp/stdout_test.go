package mcp

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// A stdio server that writes a banner, a line before every message and
// prints from a tool keeps its connection: the lines are skipped, logged
// a few times rather than once each, and every call succeeds on the one
// process.
func TestStdoutJunkIsSkipped(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"junky": stdio("-junk")}}, defaultTiming)
	tb := m.Toolbox([]string{"junky"})
	s := m.servers["junky"]
	waitFor(t, m, "the first connection attempt over", func() bool { return s.stateNow() != stateStarting })

	const calls = 20
	ok := 0
	pids := map[string]bool{}
	for i := range calls {
		name, args := "junky__echo", `{"text":"hello"}`
		switch i % 3 {
		case 1:
			name, args = "junky__shout", `{"text":"loud"}`
		case 2:
			name, args = "junky__pid", `{}`
		}
		out, err := call(t, tb, name, args)
		if err != nil {
			t.Logf("call %d (%s): %v", i, name, err)
			continue
		}
		ok++
		if name == "junky__pid" {
			pids[out] = true
		}
	}
	t.Logf("%d of %d calls succeeded", ok, calls)
	if ok != calls {
		t.Fatalf("%d of %d calls succeeded", ok, calls)
	}
	if len(pids) != 1 {
		t.Errorf("the server was restarted: pids %v", pids)
	}
	if n := rec.count(slog.LevelWarn, "MCP server disconnected; restarting") + rec.count(slog.LevelWarn, "MCP server failed to start; retrying"); n != 0 {
		t.Errorf("%d disconnects or failed starts", n)
	}
	first, found := rec.find(slog.LevelWarn, msgStdoutSkipped)
	if !found || first.attrs["line"] != "koe-test-server 1.0 starting up…" || !strings.Contains(first.attrs["hint"], "stderr") {
		t.Errorf("the first skipped line logged as %+v", first)
	}
	// Over 40 lines were skipped: the log says so a few times, not each.
	if n := rec.count(slog.LevelWarn, msgStdoutSkipped) + rec.count(slog.LevelWarn, msgStdoutSkippedMore); n > 3 {
		t.Errorf("%d warnings about skipped lines", n)
	}
	m.Close()
}

// A line longer than mcp_max_line_bytes is never held whole: a line of
// text is skipped as it streams by; a message that long ends the
// connection with an error naming the key, and the server is restarted.
func TestStdoutLineLimit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := newGate()
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"junky": stdio("-junk")}, MaxLineBytes: 4096}, g.timing(time.Millisecond, time.Millisecond))
	tb := m.Toolbox([]string{"junky"})
	waitForTool(t, m, tb, "junky__shout")
	// shout prints a 100,000-character line of text.
	if out := mustCall(t, tb, "junky__shout", `{"text":"loud"}`); out != "loud" {
		t.Errorf("shout = %q", out)
	}
	pid := mustCall(t, tb, "junky__pid", `{}`)
	// The call fails at once, with the reason or as the connection's end,
	// whichever the call sees first.
	if _, err := call(t, tb, "junky__big", `{"chars":5000}`); err == nil || !strings.Contains(err.Error(), "mcp_max_line_bytes") && !strings.Contains(err.Error(), "not connected") {
		t.Errorf("a result over the limit: %v", err)
	}
	g.next(t)()
	waitForTool(t, m, tb, "junky__pid")
	if again := mustCall(t, tb, "junky__pid", `{}`); again == pid {
		t.Errorf("still the same process %s", pid)
	}
	down, found := rec.find(slog.LevelWarn, "MCP server disconnected; restarting")
	if !found || !strings.Contains(down.attrs["err"], "mcp_max_line_bytes") {
		t.Errorf("the disconnect was logged as %+v", down)
	}
	m.Close()
}

// The filter passes on messages whole, one per line, and drops the rest:
// text, JSON that is not JSON-RPC, blank lines, an endless line of text
// read in bounded pieces.
func TestStdoutFilter(t *testing.T) {
	msg1 := `{"jsonrpc":"2.0","id":1,"result":{}}`
	batch := `  [{"jsonrpc":"2.0","method":"notifications/progress"},{"jsonrpc":"2.0","id":"a","result":1}]`
	msg2 := `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`
	in := "banner\n\n" + msg1 + "\r\n" + `{"level":"info"}` + "\n[]\n[1]\n" + batch + "\n" +
		strings.Repeat("x", 1<<20) + "\n" + msg2 // the last has no newline
	rec := newRecorder(t)
	f := newStdoutFilter(io.NopCloser(strings.NewReader(in)), 1024, slog.New(rec))
	var got bytes.Buffer
	// Small reads, as a decoder may make.
	buf := make([]byte, 7)
	for {
		n, err := f.Read(buf)
		got.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := msg1 + "\n" + strings.TrimSpace(batch) + "\n" + msg2 + "\n"
	if got.String() != want {
		t.Errorf("passed on %q, want %q", got.String(), want)
	}
	if c := cap(f.line); c > 4096 {
		t.Errorf("the filter held %d bytes for a 1 MB line", c)
	}
	if n := rec.count(slog.LevelWarn, msgStdoutSkipped); n != 1 {
		t.Errorf("%d first warnings", n)
	}

	// A message longer than the limit is an error naming the key, found
	// without reading it all.
	long := `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("y", 10<<20) + `"}` + "\n"
	r := strings.NewReader(long)
	f = newStdoutFilter(io.NopCloser(r), 1024, slog.New(rec))
	_, err := io.ReadAll(f)
	if err == nil || !strings.Contains(err.Error(), "mcp_max_line_bytes") || !strings.Contains(err.Error(), "1024") {
		t.Errorf("a long message: %v", err)
	}
	if read := len(long) - r.Len(); read > 1<<16 {
		t.Errorf("%d bytes read before giving up", read)
	}
}
