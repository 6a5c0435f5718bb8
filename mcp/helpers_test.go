package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/agent"
)

// hangGuard bounds every wait for an event; only a bug makes one last
// that long.
const hangGuard = 30 * time.Second

// testServer is the path of testdata/server, built once by TestMain.
var testServer string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "koe-mcp-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testServer = filepath.Join(dir, "server")
	build := exec.Command("go", "build", "-o", testServer, "./testdata/server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building testdata/server:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logRecord is one thing the Manager logged.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// recorder keeps what is logged, for tests that check the logs, and shows
// it in the test log.
type recorder struct {
	t       testing.TB
	mu      *sync.Mutex
	records *[]logRecord
	attrs   []slog.Attr
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{t: t, mu: &sync.Mutex{}, records: &[]logRecord{}}
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	lr := logRecord{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	var line strings.Builder
	line.WriteString(rec.Level.String() + " " + rec.Message)
	add := func(a slog.Attr) bool {
		lr.attrs[a.Key] = a.Value.String()
		fmt.Fprintf(&line, " %s=%q", a.Key, a.Value.String())
		return true
	}
	for _, a := range r.attrs {
		add(a)
	}
	rec.Attrs(add)
	r.mu.Lock()
	*r.records = append(*r.records, lr)
	r.mu.Unlock()
	r.t.Log(line.String())
	return nil
}

func (r *recorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *r
	c.attrs = append(slices.Clone(r.attrs), attrs...)
	return &c
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

// count returns how many records at level have msg.
func (r *recorder) count(level slog.Level, msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range *r.records {
		if rec.level == level && rec.msg == msg {
			n++
		}
	}
	return n
}

// find returns the first record at level with msg.
func (r *recorder) find(level slog.Level, msg string) (logRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range *r.records {
		if rec.level == level && rec.msg == msg {
			return rec, true
		}
	}
	return logRecord{}, false
}

// startManager starts a Manager closed at cleanup.
func startManager(t testing.TB, cfg Config, tm timing) (*Manager, *recorder) {
	t.Helper()
	rec := newRecorder(t)
	m, err := start(context.Background(), cfg, slog.New(rec), tm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, rec
}

// waitFor waits for cond to hold, looking again at every change the
// Manager reports.
func waitFor(t testing.TB, m *Manager, what string, cond func() bool) {
	t.Helper()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	for {
		changed := m.watch()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-guard.C:
			t.Fatalf("%s: not within %v", what, hangGuard)
		}
	}
}

// waitForTool waits until tb offers name.
func waitForTool(t testing.TB, m *Manager, tb agent.Toolbox, name string) {
	t.Helper()
	waitFor(t, m, "tool "+name+" offered", func() bool { return hasTool(tb, name) })
}

func hasTool(tb agent.Toolbox, name string) bool {
	return slices.ContainsFunc(tb.Specs(), func(s agent.ToolSpec) bool { return s.Name == name })
}

// call runs one call within the hang guard.
func call(t testing.TB, tb agent.Toolbox, name, args string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	return tb.Call(ctx, agent.ToolCall{ID: "call_1", Name: name, Arguments: args})
}

// mustCall runs a call that must succeed.
func mustCall(t testing.TB, tb agent.Toolbox, name, args string) string {
	t.Helper()
	out, err := call(t, tb, name, args)
	if err != nil {
		t.Fatalf("%s(%s): %v", name, args, err)
	}
	return out
}

// gate is a timing whose waits block until the test lets them go, and
// which records what each wait was for.
type gate struct {
	mu     sync.Mutex
	delays []time.Duration
	waits  chan chan struct{}
}

func newGate() *gate { return &gate{waits: make(chan chan struct{})} }

func (g *gate) timing(first, max time.Duration) timing {
	return timing{firstDelay: first, maxDelay: max, stableAfter: time.Hour, wait: g.wait}
}

func (g *gate) wait(ctx context.Context, d time.Duration) error {
	g.mu.Lock()
	g.delays = append(g.delays, d)
	g.mu.Unlock()
	release := make(chan struct{})
	select {
	case g.waits <- release:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next waits until the server waits to retry, and returns the function
// that lets it.
func (g *gate) next(t testing.TB) func() {
	t.Helper()
	select {
	case release := <-g.waits:
		return func() { close(release) }
	case <-time.After(hangGuard):
		t.Fatalf("no retry within %v", hangGuard)
		return nil
	}
}

func (g *gate) recorded() []time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.delays)
}

// stdio configures the test server over stdio.
func stdio(args ...string) ServerConfig {
	return ServerConfig{Command: testServer, Args: args}
}

// startUntilCleanup starts cmd and kills it when the test ends; the
// returned stop kills it sooner (once, whoever calls it first).
func startUntilCleanup(t testing.TB, cmd *exec.Cmd) (stop func()) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}
