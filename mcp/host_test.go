package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"koe/agent"
	"koe/llm"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

// hostServerOnce builds testdata/hostserver next to the test server.
var hostServerOnce = sync.OnceValues(func() (string, error) {
	path := filepath.Join(filepath.Dir(testServer), "hostserver")
	out, err := exec.Command("go", "build", "-o", path, "./testdata/hostserver").CombinedOutput()
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return path, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string {
	return "building testdata/hostserver: " + e.err.Error() + ": " + e.out
}

// hostServer configures testdata/hostserver over stdio.
func hostServer(t testing.TB) ServerConfig {
	t.Helper()
	path, err := hostServerOnce()
	if err != nil {
		t.Fatal(err)
	}
	return ServerConfig{Command: path}
}

// hostEvents records what a call's ToolHost is told.
type hostEvents struct {
	mu    sync.Mutex
	notes []string
	seen  chan string
}

func newHostEvents() *hostEvents { return &hostEvents{seen: make(chan string, 64)} }

func (e *hostEvents) add(s string) {
	e.mu.Lock()
	e.notes = append(e.notes, s)
	e.mu.Unlock()
	select {
	case e.seen <- s:
	default:
	}
}

func (e *hostEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.notes...)
}

// hostCall calls a tool the way a turn does: with a ToolHost of the
// given model, whose notes go to ev.
func hostCall(t testing.TB, tb agent.Toolbox, model agent.LLM, vision bool, ev *hostEvents, name, args string) (*agent.ToolHost, string, error) {
	t.Helper()
	c := agent.ToolCall{ID: "call_h", Name: name, Arguments: args}
	h := agent.NewToolHost(c, model, "test-model", vision,
		func(text string) { ev.add("progress: " + text) },
		func(task, state, text, _ string) { ev.add("status " + state + ": " + text + " (" + task + ")") })
	ctx, cancel := context.WithTimeout(agent.WithToolHost(context.Background(), h), hangGuard)
	defer cancel()
	out, err := tb.Call(ctx, c)
	return h, out, err
}

// samplingModel is the real LLM client on a fake server that answers
// every request with text.
func samplingModel(t testing.TB, text string) (*llm.Client, *fakellm.Server) {
	t.Helper()
	s := fakellmtest.StartWith(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: []string{text}} })
	return llm.New(agent.Config{BaseURL: s.URL(), APIKey: "sk-test", Model: "test-model", IdleTimeout: hangGuard}, nil), s
}

// A server allowed to sample gets the character's model's answer to its
// request, with its system prompt, temperature and maxTokens (capped);
// the turn sees the request as a status while it runs, and the log has
// it. Over its budget the server gets an error, and so does one that asks
// outside a turn.
func TestEverythingSampling(t *testing.T) {
	cfg := everythingStdio(t)
	// Checked after the fake model's server has stopped, at cleanup.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	model, fake := samplingModel(t, "Forty-two.")
	cfg.Sampling = true
	cfg.SamplingPerMinute = 1
	cfg.SamplingMaxTokens = 64
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"everything": cfg}}, defaultTiming)
	tb := m.Toolbox([]string{"everything"})
	waitForTool(t, m, tb, "everything__trigger-sampling-request")

	ev := newHostEvents()
	_, out, err := hostCall(t, tb, model, false, ev, "everything__trigger-sampling-request", `{"prompt":"six times seven?","maxTokens":5000}`)
	if err != nil || !strings.Contains(out, "Forty-two.") || !strings.Contains(out, `"model": "test-model"`) {
		t.Fatalf("sampling: %q, %v", out, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d LLM requests, want 1", len(reqs))
	}
	r := reqs[0]
	if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[0].Content != "You are a helpful test server." ||
		r.Messages[1].Role != "user" || !strings.Contains(r.Messages[1].Content, "six times seven?") {
		t.Errorf("the model was asked %+v", r.Messages)
	}
	var body struct {
		MaxTokens   int     `json:"max_tokens"`
		Temperature float64 `json:"temperature"`
	}
	if err := json.Unmarshal(r.Raw, &body); err != nil || body.MaxTokens != 64 || body.Temperature < 0.69 || body.Temperature > 0.71 {
		t.Errorf("max_tokens %d (want sampling_max_tokens, 64), temperature %v (want 0.7): %v", body.MaxTokens, body.Temperature, err)
	}
	notes := ev.list()
	if len(notes) != 2 || !strings.HasPrefix(notes[0], "status start: MCP server everything asks the model") ||
		!strings.HasPrefix(notes[1], "status end: ") {
		t.Errorf("the turn saw %q", notes)
	}
	if _, ok := rec.find(slog.LevelInfo, "MCP server's sampling request"); !ok {
		t.Error("the request was not logged")
	}

	// The budget is one request a minute.
	_, _, err = hostCall(t, tb, model, false, ev, "everything__trigger-sampling-request", `{"prompt":"again"}`)
	if err == nil || !strings.Contains(err.Error(), "sampling_requests_per_minute") {
		t.Errorf("over the budget: %v", err)
	}
	// Outside a turn no model is there to ask.
	if _, err := call(t, tb, "everything__trigger-sampling-request", `{"prompt":"hi"}`); err == nil || !strings.Contains(err.Error(), "runs for a character's turn") {
		t.Errorf("outside a turn: %v", err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("%d LLM requests, want still 1", n)
	}
	m.Close()
}

// Sampling is off unless configured: koe does not offer it, so the
// server does not offer its sampling tool.
func TestEverythingSamplingOff(t *testing.T) {
	cfg := everythingStdio(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"everything": cfg}}, defaultTiming)
	tb := m.Toolbox([]string{"everything"})
	waitForTool(t, m, tb, "everything__echo")
	if hasTool(tb, "everything__trigger-sampling-request") {
		t.Error("sampling offered without sampling: true")
	}
	m.Close()
}

// A tool's image reaches a model that sees images, and only such a model;
// progress becomes the call's status; the server's log messages go to
// koe's log.
func TestEverythingImagesProgressLogs(t *testing.T) {
	cfg := everythingStdio(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"everything": cfg},
		HostLimits: HostLimits{ProgressInterval: time.Nanosecond, LogPerMinute: 2}}, defaultTiming)
	tb := m.Toolbox([]string{"everything"})
	waitForTool(t, m, tb, "everything__get-tiny-image")
	ev := newHostEvents()

	h, out, err := hostCall(t, tb, nil, true, ev, "everything__get-tiny-image", `{}`)
	imgs := h.Images()
	if err != nil || len(imgs) != 1 || imgs[0].MimeType != "image/png" || !strings.HasPrefix(imgs[0].Data, "iVBORw0KGgo") || !strings.Contains(out, "[image/png, ") {
		t.Errorf("tiny image with vision: %q, %v, images %d", out, err, len(imgs))
	}
	if h, _, _ := hostCall(t, tb, nil, false, ev, "everything__get-tiny-image", `{}`); len(h.Images()) != 0 {
		t.Error("a model without vision got the image")
	}

	_, out, err = hostCall(t, tb, nil, false, ev, "everything__trigger-long-running-operation", `{"duration":1,"steps":2}`)
	if err != nil {
		t.Fatalf("long operation: %v", err)
	}
	var progress []string
	for _, n := range ev.list() {
		if strings.HasPrefix(n, "progress: ") {
			progress = append(progress, n)
		}
	}
	if len(progress) == 0 || !strings.Contains(progress[len(progress)-1], "of 2") {
		t.Errorf("progress seen: %q (result %q)", progress, out)
	}

	// It logs once at once, then every 5 s: two go to the log, the
	// third is over mcp_log_per_minute.
	mustCall(t, tb, "everything__toggle-simulated-logging", `{}`)
	dropped := "MCP server's log messages are dropped for the rest of the minute: more than mcp_log_per_minute"
	testkit.Eventually(t, "a log message dropped", func() bool { return rec.count(slog.LevelWarn, dropped) > 0 })
	mustCall(t, tb, "everything__toggle-simulated-logging", `{}`)
	m.Close()
	levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "notice": slog.LevelInfo, "warning": slog.LevelWarn,
		"error": slog.LevelError, "critical": slog.LevelError, "alert": slog.LevelError, "emergency": slog.LevelError}
	logged := 0
	rec.mu.Lock()
	for _, r := range *rec.records {
		if r.msg != "MCP server log" {
			continue
		}
		logged++
		// The simulated messages, and the one it logs on hearing koe's
		// roots (they count towards the limit like any other).
		data := r.attrs["data"]
		ours := strings.Contains(data, "-level message") || strings.Contains(data, "level-message") || strings.HasPrefix(data, "Roots updated")
		if want, ok := levels[r.attrs["level"]]; !ok || r.level != want || !ours {
			t.Errorf("logged at %s: %v", r.level, r.attrs)
		}
	}
	rec.mu.Unlock()
	if logged != 2 {
		t.Errorf("%d of its messages logged, want 2 (mcp_log_per_minute)", logged)
	}
}

// Images are bounded in count and size; structured content without text
// is given as JSON.
func TestImageLimitsAndStructured(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"h": hostServer(t)},
		HostLimits: HostLimits{MaxImages: 2, MaxImageBytes: 2048}}, defaultTiming)
	tb := m.Toolbox([]string{"h"})
	waitForTool(t, m, tb, "h__images")
	ev := newHostEvents()
	h, out, err := hostCall(t, tb, nil, true, ev, "h__images", `{"count":3,"bytes":100}`)
	if err != nil || len(h.Images()) != 2 || !strings.Contains(out, "1 more images are not shown: a result shows at most 2 (mcp_max_images)") {
		t.Errorf("three images: %d shown, %q, %v", len(h.Images()), out, err)
	}
	h, out, err = hostCall(t, tb, nil, true, ev, "h__images", `{"count":1,"bytes":4096}`)
	if err != nil || len(h.Images()) != 0 || !strings.Contains(out, "larger than 2 KB (mcp_max_image_bytes)") {
		t.Errorf("a large image: %d shown, %q, %v", len(h.Images()), out, err)
	}
	if out := mustCall(t, tb, "h__structured", `{}`); out != `{"conditions":"sunny","temperature":21.5}` {
		t.Errorf("structured = %q", out)
	}
	m.Close()
}

// A stdio server runs in its cwd.
func TestCwd(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := hostServer(t)
	cfg.Cwd = t.TempDir()
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"h": cfg}}, defaultTiming)
	tb := m.Toolbox([]string{"h"})
	waitForTool(t, m, tb, "h__cwd")
	if out := mustCall(t, tb, "h__cwd", `{}`); out != cfg.Cwd {
		t.Errorf("cwd = %q, want %q", out, cfg.Cwd)
	}
	m.Close()
}

func TestHostConfigErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Servers: map[string]ServerConfig{"s": {Command: "x", ServerHost: ServerHost{Cwd: "rel/dir"}}}}, "mcp_servers.s.cwd \"rel/dir\" must be a clean absolute path"},
		{Config{Servers: map[string]ServerConfig{"s": {Command: "x", ServerHost: ServerHost{Cwd: file}}}}, "is not a directory"},
		{Config{Servers: map[string]ServerConfig{"s": {Command: "x", ServerHost: ServerHost{Cwd: file + "/nope"}}}}, "mcp_servers.s.cwd: stat"},
		{Config{Servers: map[string]ServerConfig{"s": {URL: "http://127.0.0.1:1/mcp", ServerHost: ServerHost{Cwd: "/"}}}}, "only a stdio server (command) takes cwd"},
		{Config{Servers: map[string]ServerConfig{"s": {Command: "x", ServerHost: ServerHost{PingInterval: time.Millisecond}}}}, "mcp_servers.s.ping_interval 1ms is out of range"},
		{Config{Servers: map[string]ServerConfig{"s": {Command: "x", ServerHost: ServerHost{SamplingPerMinute: -1}}}}, "sampling_requests_per_minute -1 is negative"},
		{Config{HostLimits: HostLimits{MaxImages: 100}}, "mcp_max_images 100 is out of range"},
		{Config{HostLimits: HostLimits{MaxImageBytes: 10}}, "mcp_max_image_bytes 10 is out of range"},
		{Config{HostLimits: HostLimits{MaxLogChars: 5}}, "mcp_max_log_chars 5 is out of range"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// A server that stops answering (its process stopped) fails its ping and
// is restarted: a new process answers.
func TestHungServerRestarted(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := hostServer(t)
	cfg.PingInterval = time.Second
	cfg.Timeout = 2 * time.Second
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"h": cfg}}, defaultTiming)
	tb := m.Toolbox([]string{"h"})
	waitForTool(t, m, tb, "h__pid")
	first := mustCall(t, tb, "h__pid", `{}`)
	pid, err := strconv.Atoi(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Should the test fail before koe kills it, it must not stay stopped.
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	waitFor(t, m, "the hung server restarted", func() bool {
		return rec.count(slog.LevelWarn, "MCP server did not answer a ping; restarting it") > 0 && hasTool(tb, "h__pid") &&
			rec.count(slog.LevelInfo, "MCP server connected") >= 2
	})
	if second := mustCall(t, tb, "h__pid", `{}`); second == first {
		t.Errorf("the same process (%s) answers after the restart", second)
	}
	m.Close()
}
