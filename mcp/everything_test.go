package mcp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"koe/agent"
	"koe/testkit/everythingtest"
	"koe/testkit/proctest"
)

// everything returns node and the entry point of the MCP project's
// reference server from npm, which users' Node servers are built like
// (testkit/everythingtest finds it); without them the test is skipped, or
// fails on CI.
func everything(t testing.TB) (node, entry string) {
	t.Helper()
	return everythingtest.Find(t)
}

// everythingStdio is the server over stdio: its first argument names the
// transport.
func everythingStdio(t testing.TB) ServerConfig {
	node, entry := everything(t)
	return ServerConfig{Command: node, Args: []string{entry, "stdio"}}
}

// everythingHTTP starts the server over streamable HTTP, stopped at
// cleanup, and returns its config. It listens on the port in PORT and says
// so on stderr; its endpoint is /mcp.
func everythingHTTP(t testing.TB) ServerConfig {
	t.Helper()
	node, entry := everything(t)
	// A free port, found by listening, may be taken again before the
	// server binds it: then the server says so and exits, and another
	// port is tried.
	for range 3 {
		port := freePort(t)
		if ready := startEverythingHTTP(t, node, entry, port); ready {
			return ServerConfig{URL: "http://127.0.0.1:" + port + "/mcp"}
		}
	}
	t.Fatal("server-everything did not start over HTTP")
	return ServerConfig{}
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// startEverythingHTTP runs the server on port until the test ends, and
// reports whether it listens.
func startEverythingHTTP(t testing.TB, node, entry, port string) bool {
	t.Helper()
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	// It logs every request on stdout.
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stop := startUntilCleanup(t, cmd)
	// Only a hang makes the guard fire: the kill ends the read below.
	guard := time.AfterFunc(hangGuard, stop)
	defer guard.Stop()
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		t.Log("server-everything:", lines.Text())
		if strings.Contains(lines.Text(), "listening on port "+port) {
			// Keep reading, or a full pipe would block the server.
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return true
		}
	}
	stop()
	return false
}

// checkEverything lists the server's tools and calls some.
func checkEverything(t *testing.T, cfg ServerConfig) {
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"everything": cfg}}, defaultTiming)
	tb := m.Toolbox([]string{"everything"})
	waitForTool(t, m, tb, "everything__echo")
	var names []string
	for _, s := range tb.Specs() {
		names = append(names, s.Name)
		if !functionName.MatchString(s.Name) || len(s.Parameters) == 0 {
			t.Errorf("tool %q with schema %s", s.Name, s.Parameters)
		}
	}
	t.Logf("%d tools: %s", len(names), strings.Join(names, ", "))
	for _, want := range []string{"everything__get-sum", "everything__get-tiny-image"} {
		if !hasTool(tb, want) {
			t.Errorf("no %s", want)
		}
	}
	if out := mustCall(t, tb, "everything__echo", `{"message":"hello from koe"}`); out != "Echo: hello from koe" {
		t.Errorf("echo = %q", out)
	}
	if out := mustCall(t, tb, "everything__get-sum", `{"a":2,"b":40}`); !strings.Contains(out, "42") {
		t.Errorf("get-sum = %q", out)
	}
	if out := mustCall(t, tb, "everything__get-tiny-image", `{}`); !strings.Contains(out, "[image/png, ") {
		t.Errorf("get-tiny-image = %q, want the image summarised", out)
	}
	// The server checks arguments against its schema: a wrong one is an
	// error the model can read.
	if _, err := call(t, tb, "everything__get-sum", `{"a":"two"}`); err == nil {
		t.Error("get-sum with a string: no error")
	}
	// A long operation, cancelled, returns at once.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := tb.Call(ctx, agent.ToolCall{Name: "everything__trigger-long-running-operation", Arguments: `{"duration":600,"steps":2}`})
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled long operation: %v", err)
	}
	m.Close()
}

func TestEverythingStdio(t *testing.T) {
	cfg := everythingStdio(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	checkEverything(t, cfg)

	// Its get-env tool shows the environment a Node server gets: its own
	// env and PATH, not koe's secrets.
	t.Setenv("OPENAI_API_KEY", "sk-koe-secret")
	cfg.Env = map[string]string{"KOE_MCP_TEST": "from-config"}
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"everything": cfg}}, defaultTiming)
	tb := m.Toolbox([]string{"everything"})
	waitForTool(t, m, tb, "everything__get-env")
	env := mustCall(t, tb, "everything__get-env", `{}`)
	if !strings.Contains(env, "from-config") || !strings.Contains(env, `"PATH"`) || strings.Contains(env, "sk-koe-secret") {
		t.Errorf("the server's environment: %s", env)
	}
	m.Close()
}

// Wrapped by a script that prints a banner on stdout first, as launchers
// do, the server still works.
func TestEverythingStdioBanner(t *testing.T) {
	cfg := everythingStdio(t)
	sh := proctest.LookPath(t, "sh", "dash")
	cfg.Command, cfg.Args = sh, append([]string{"-c", `echo "Starting the everything server..."; exec "$@"`, "sh", cfg.Command}, cfg.Args...)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	checkEverything(t, cfg)
}

func TestEverythingHTTP(t *testing.T) {
	cfg := everythingHTTP(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	checkEverything(t, cfg)
}

// benchmarkEcho measures one echo call through the toolbox: koe's work,
// the transport and the server's.
func benchmarkEcho(b *testing.B, cfg ServerConfig, tool, args string) {
	m, _ := startManager(b, Config{Servers: map[string]ServerConfig{"s": cfg}}, defaultTiming)
	tb := m.Toolbox([]string{"s"})
	waitForTool(b, m, tb, tool)
	ctx := context.Background()
	c := agent.ToolCall{ID: "call_1", Name: tool, Arguments: args}
	for b.Loop() {
		if _, err := tb.Call(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEverythingEchoStdio(b *testing.B) {
	benchmarkEcho(b, everythingStdio(b), "s__echo", `{"message":"hello"}`)
}

func BenchmarkEverythingEchoHTTP(b *testing.B) {
	benchmarkEcho(b, everythingHTTP(b), "s__echo", `{"message":"hello"}`)
}

// The Go test server, for comparison: what is left is koe's and the
// transport's share.
func BenchmarkGoServerEchoStdio(b *testing.B) {
	benchmarkEcho(b, stdio(), "s__echo", `{"text":"hello"}`)
}

func BenchmarkGoServerEchoHTTP(b *testing.B) {
	benchmarkEcho(b, ServerConfig{URL: startHTTPServer(b, testServer, "-http").url}, "s__echo", `{"text":"hello"}`)
}
