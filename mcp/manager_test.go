package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"koe/agent"
	"koe/testkit/proctest"
)

// The test server's tools are listed under "test__", with their schemas,
// and calls reach them: text, isError, non-text content, long results, a
// name that had to be made to fit.
func TestListAndCall(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"test": stdio()}, MaxResultChars: 500}, defaultTiming)
	tb := m.Toolbox([]string{"test"})
	waitForTool(t, m, tb, "test__echo")

	specs := tb.Specs()
	byName := map[string]agent.ToolSpec{}
	valid := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	for _, s := range specs {
		byName[s.Name] = s
		if !valid.MatchString(s.Name) {
			t.Errorf("tool name %q breaks the function-name rules", s.Name)
		}
	}
	for _, want := range []string{"test__echo", "test__fail", "test__sleep", "test__crash", "test__add_tool"} {
		if _, ok := byName[want]; !ok {
			t.Errorf("no %s among %d tools", want, len(specs))
		}
	}
	echo := byName["test__echo"]
	if echo.Description != "Returns the text it is given." {
		t.Errorf("echo's description = %q", echo.Description)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(echo.Parameters, &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil {
		t.Errorf("echo's schema = %s (%v), want the server's object schema with text", echo.Parameters, err)
	}

	if out := mustCall(t, tb, "test__echo", `{"text":"hello"}`); out != "hello" {
		t.Errorf("echo = %q", out)
	}
	if _, err := call(t, tb, "test__fail", `{"text":"it broke"}`); err == nil || err.Error() != "it broke" {
		t.Errorf("fail: err = %v, want the tool's text", err)
	}
	if out := mustCall(t, tb, "test__image", ``); out != "a picture:\n[image/png, 12 KB]" {
		t.Errorf("image = %q", out)
	}
	out := mustCall(t, tb, "test__big", `{"chars":2000}`)
	if n := utf8.RuneCountInString(out); n != 500 || !strings.HasPrefix(out, "éééé") || !strings.Contains(out, "of 2000 characters are shown (mcp_max_result_chars)") {
		t.Errorf("big: %d characters: …%s", n, out[len(out)-120:])
	}

	weird := toolName("test", "weird.name")
	if _, ok := byName[weird]; !ok || weird == "test__weird.name" {
		t.Errorf("weird.name offered as %q? tools: %v", weird, specs)
	}
	if out := mustCall(t, tb, weird, `{}`); out != "weird" {
		t.Errorf("%s = %q", weird, out)
	}

	for _, tc := range []struct{ name, args, want string }{
		{"test__nope", `{}`, `unknown tool "test__nope" (available: test__`},
		{"other__echo", `{}`, `unknown tool "other__echo"`},
		{"echo", `{}`, `unknown tool "echo"`},
		{"test__echo", `["text"]`, "the arguments are not a JSON object"},
		{"test__echo", `{"text":`, "the arguments are not a JSON object"},
		{"test__echo", `{"text":3}`, `want "string"`},
	} {
		if _, err := call(t, tb, tc.name, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s(%s): err = %v, want %q", tc.name, tc.args, err, tc.want)
		}
	}

	// A character that enables no server, or one that is not configured,
	// gets no tools.
	if specs := m.Toolbox(nil).Specs(); len(specs) != 0 {
		t.Errorf("no servers enabled: %d tools", len(specs))
	}
	if err := m.CheckServers([]string{"test", "tset"}); err == nil || !strings.Contains(err.Error(), `unknown MCP server "tset" (mcp_servers has test)`) {
		t.Errorf("CheckServers: %v", err)
	}
	m.Close()
}

// Cancelling a call's ctx ends the call at once and tells the server,
// whose handler sees its own ctx end.
func TestCancelReachesServer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"test": stdio()}}, defaultTiming)
	tb := m.Toolbox([]string{"test"})
	waitForTool(t, m, tb, "test__sleep")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := tb.Call(ctx, agent.ToolCall{Name: "test__sleep", Arguments: `{}`})
		errc <- err
	}()
	mustCall(t, tb, "test__wait_sleeping", `{}`)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || err.Error() != "the tool call was cancelled" {
			t.Errorf("sleep: err = %v, want a cancelled call", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the cancelled call did not return")
	}
	if out := mustCall(t, tb, "test__wait_cancelled", `{}`); out != "a sleep was cancelled" {
		t.Errorf("wait_cancelled = %q", out)
	}
	m.Close()
}

// The server's own timeout ends a call that outlasts it, with an error
// naming the key, which is not the caller's deadline.
func TestServerTimeout(t *testing.T) {
	cfg := stdio()
	cfg.Timeout = 2 * time.Second
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"test": cfg}}, defaultTiming)
	tb := m.Toolbox([]string{"test"})
	waitForTool(t, m, tb, "test__sleep")
	_, err := call(t, tb, "test__sleep", `{}`)
	if err == nil || err.Error() != "MCP server test did not answer within 2s (mcp_servers.test.timeout)" || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}

// A server that crashes: the call that crashed it and the calls while it
// is down fail with the not-connected error, its process is gone, its
// tools are withdrawn, and after the restart they are listed again on a
// new process.
func TestCrashAndRestart(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := newGate()
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"test": stdio()}}, g.timing(time.Second, 8*time.Second))
	tb := m.Toolbox([]string{"test"})
	waitForTool(t, m, tb, "test__echo")
	first, err := strconv.Atoi(mustCall(t, tb, "test__pid", `{}`))
	if err != nil {
		t.Fatal(err)
	}

	notConnected := "MCP server test is not connected (restarting)"
	if _, err := call(t, tb, "test__crash", `{}`); err == nil || err.Error() != notConnected {
		t.Errorf("crash: err = %v, want %q", err, notConnected)
	}
	release := g.next(t) // the server now waits to restart
	if _, err := call(t, tb, "test__echo", `{"text":"hi"}`); err == nil || err.Error() != notConnected {
		t.Errorf("echo while down: err = %v, want %q", err, notConnected)
	}
	if len(tb.Specs()) != 0 {
		t.Errorf("tools offered while down: %v", tb.Specs())
	}
	if proctest.Alive(first) {
		t.Errorf("the crashed server's process %d still runs", first)
	}
	if r, ok := rec.find(slog.LevelWarn, "MCP server disconnected; restarting"); !ok ||
		!strings.Contains(r.attrs["err"], "exit status 3") || !strings.Contains(r.attrs["err"], "crashing on request") {
		t.Errorf("no warning with the exit status and stderr: %+v", r)
	}

	release()
	waitForTool(t, m, tb, "test__echo")
	second, _ := strconv.Atoi(mustCall(t, tb, "test__pid", `{}`))
	if second == first || second == 0 {
		t.Errorf("pid after the restart = %d, before %d", second, first)
	}
	if out := mustCall(t, tb, "test__echo", `{"text":"back"}`); out != "back" {
		t.Errorf("echo after the restart = %q", out)
	}
	if d := g.recorded(); len(d) != 1 || d[0] != time.Second {
		t.Errorf("waited %v before restarting, want [1s]", d)
	}
	m.Close()
	proctest.WaitGone(t, second)
}

// A stdio server gets its own env and PATH, not koe's secrets; what it
// starts in the background is stopped with it.
func TestStdioEnvAndGroup(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Setenv("OPENAI_API_KEY", "sk-koe-secret")
	pidFile := t.TempDir() + "/child.pid"
	cfg := ServerConfig{
		Command: "/bin/sh",
		Args:    []string{"-c", `sleep 3600 & echo $! > "$PID_FILE"; exec "$SERVER"`},
		Env:     map[string]string{"PID_FILE": pidFile, "SERVER": testServer, "KOE_MCP_TEST": "yes"},
	}
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"test": cfg}}, defaultTiming)
	tb := m.Toolbox([]string{"test"})
	waitForTool(t, m, tb, "test__env")
	for name, want := range map[string]string{"KOE_MCP_TEST": "yes", "OPENAI_API_KEY": "(unset)", "PATH": os.Getenv("PATH")} {
		if got := mustCall(t, tb, "test__env", `{"name":"`+name+`"}`); got != want {
			t.Errorf("the server's %s = %q, want %q", name, got, want)
		}
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !proctest.Alive(child) {
		t.Fatalf("the server's background child %q does not run: %v", b, err)
	}
	m.Close()
	// killGroup sent SIGKILL before Close returned; the orphan may take a
	// moment to be reaped by whoever adopted it.
	proctest.WaitGone(t, child)
}

// A server that adds a tool at run time says so, and the tool is offered
// and callable.
func TestToolListChanged(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"test": stdio()}}, defaultTiming)
	tb := m.Toolbox([]string{"test"})
	waitForTool(t, m, tb, "test__echo")
	if hasTool(tb, "test__late") {
		t.Fatal("test__late offered before it was added")
	}
	mustCall(t, tb, "test__add_tool", `{"name":"late"}`)
	waitForTool(t, m, tb, "test__late")
	if out := mustCall(t, tb, "test__late", ``); out != "I am late" {
		t.Errorf("late = %q", out)
	}
	if rec.count(slog.LevelInfo, "MCP server's tools changed") == 0 {
		t.Error("the change was not logged")
	}

	// A tool named like another's fitted name is left out, and said so;
	// the first keeps its name.
	weird := toolName("test", "weird.name")
	mustCall(t, tb, "test__add_tool", `{"name":"`+strings.TrimPrefix(weird, "test__")+`"}`)
	waitFor(t, m, "the collision reported", func() bool {
		return rec.count(slog.LevelWarn, "MCP tool left out: its name for the model is another tool's") > 0
	})
	if out := mustCall(t, tb, weird, `{}`); out != "weird" {
		t.Errorf("%s = %q, want weird.name's answer", weird, out)
	}
	m.Close()
}

// Close stops the server's process (and waits for it) and every
// goroutine; calls after it fail.
func TestCloseStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"a": stdio(), "b": stdio()}}, defaultTiming)
	tb := m.Toolbox([]string{"a", "b"})
	waitForTool(t, m, tb, "a__pid")
	waitForTool(t, m, tb, "b__pid")
	var pids []int
	for _, name := range []string{"a__pid", "b__pid"} {
		pid, err := strconv.Atoi(mustCall(t, tb, name, `{}`))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	m.Close()
	for _, pid := range pids {
		// Close waited for the process: not even a zombie is left.
		if proctest.Alive(pid) {
			t.Errorf("process %d runs after Close", pid)
		}
	}
	if _, err := call(t, tb, "a__echo", `{}`); err == nil || err.Error() != "MCP server a is not connected (stopped)" {
		t.Errorf("call after Close: %v", err)
	}
	m.Close() // twice is fine
}

// Closing while a call runs ends the call.
func TestCloseDuringCall(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"test": stdio()}}, defaultTiming)
	tb := m.Toolbox([]string{"test"})
	waitForTool(t, m, tb, "test__sleep")
	errc := make(chan error, 1)
	go func() {
		_, err := call(t, tb, "test__sleep", `{}`)
		errc <- err
	}()
	mustCall(t, tb, "test__wait_sleeping", `{}`)
	m.Close()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "MCP server test") {
		t.Errorf("sleep during Close: %v", err)
	}
}

// A server that cannot start is retried with a doubling, capped delay,
// and the failure is logged once, with what it said on stderr, not at
// every retry.
func TestStartFailureBacksOff(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := newGate()
	broken := ServerConfig{Command: "/bin/sh", Args: []string{"-c", "echo 'no module named mcp_time' >&2; exit 1"}}
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"broken": broken}}, g.timing(time.Second, 4*time.Second))
	tb := m.Toolbox([]string{"broken"})
	for range 5 {
		release := g.next(t)
		if _, err := call(t, tb, "broken__tool", `{}`); err == nil || err.Error() != "MCP server broken is not connected (restarting)" {
			t.Errorf("call while failing: %v", err)
		}
		release()
	}
	g.next(t)
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
	if d := g.recorded(); !slices.Equal(d, want) {
		t.Errorf("delays %v, want %v", d, want)
	}
	if n := rec.count(slog.LevelWarn, "MCP server failed to start; retrying"); n != 1 {
		t.Errorf("the failure was logged %d times at warn, want once", n)
	}
	r, _ := rec.find(slog.LevelWarn, "MCP server failed to start; retrying")
	if !strings.Contains(r.attrs["err"], "exit status 1") || !strings.Contains(r.attrs["err"], "no module named mcp_time") || r.attrs["mcp_server"] != "broken" {
		t.Errorf("the warning does not say why: %+v", r)
	}
	m.Close()
}

// A server that starts later than koe is connected once it is there: the
// retries find it.
func TestServerAppearsLater(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := newGate()
	dir := t.TempDir()
	link := dir + "/server"
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"late": {Command: link}}}, g.timing(time.Second, 4*time.Second))
	tb := m.Toolbox([]string{"late"})
	release := g.next(t)
	if err := os.Symlink(testServer, link); err != nil {
		t.Fatal(err)
	}
	release()
	waitForTool(t, m, tb, "late__echo")
	m.Close()
}

// The test server over streamable HTTP: the configured headers reach it,
// calls and list changes work as over stdio.
func TestHTTP(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := startHTTPServer(t, testServer, "-http")
	cfg := Config{Servers: map[string]ServerConfig{"web": {URL: srv.url, Headers: map[string]string{"Authorization": "Bearer s3cret"}}}}
	m, _ := startManager(t, cfg, defaultTiming)
	tb := m.Toolbox([]string{"web"})
	waitForTool(t, m, tb, "web__echo")
	if out := mustCall(t, tb, "web__echo", `{"text":"over http"}`); out != "over http" {
		t.Errorf("echo = %q", out)
	}
	if out := mustCall(t, tb, "web__header", `{"name":"Authorization"}`); out != "Bearer s3cret" {
		t.Errorf("the server saw Authorization %q", out)
	}
	mustCall(t, tb, "web__add_tool", `{"name":"late"}`)
	waitForTool(t, m, tb, "web__late")
	m.Close()
}

// An HTTP server that goes away is noticed, and found again when it is
// back (a new process, so a new session).
func TestHTTPServerRestarts(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	first := startHTTPServer(t, testServer, "-http")
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"web": {URL: first.url}}}, defaultTiming)
	tb := m.Toolbox([]string{"web"})
	waitForTool(t, m, tb, "web__echo")
	first.stop()
	waitFor(t, m, "the server's tools withdrawn", func() bool { return len(tb.Specs()) == 0 })
	if _, err := call(t, tb, "web__echo", `{"text":"x"}`); err == nil || err.Error() != "MCP server web is not connected (restarting)" {
		t.Errorf("call while down: %v", err)
	}
	startHTTPServer(t, testServer, "-http", "-addr", strings.TrimSuffix(strings.TrimPrefix(first.url, "http://"), "/mcp"))
	waitForTool(t, m, tb, "web__echo")
	if out := mustCall(t, tb, "web__echo", `{"text":"again"}`); out != "again" {
		t.Errorf("echo = %q", out)
	}
	if rec.count(slog.LevelWarn, "MCP server disconnected; restarting") == 0 {
		t.Error("the disconnection was not logged")
	}
	m.Close()
}

// httpServer is a test server over HTTP.
type httpServer struct {
	url  string
	stop func()
}

// startHTTPServer runs the test server over HTTP until the test ends and
// returns its endpoint, which it prints first.
func startHTTPServer(t testing.TB, bin string, args ...string) httpServer {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stop := startUntilCleanup(t, cmd)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the HTTP server printed no endpoint: %v", err)
	}
	return httpServer{url: strings.TrimSpace(line), stop: stop}
}
