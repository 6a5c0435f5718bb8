package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/app"
	"koe/testkit"
)

// server.max_connections counts WebSockets too, for as long as they are
// open; one connection more gets a 503 that names the key (unless it only
// asks for a probe: see TestProbesGetThroughAFullKoe).
func TestMaxConnectionsCountsWebSockets(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.MaxConnections = 3
	m := startKoe(t, cfg)
	addr := m.Addr()

	var wss []*client
	for i := 0; i < 3; i++ {
		wss = append(wss, dialGreeted(t, addr))
	}
	r := rawGet(t, addr, "/api/sessions", addr)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "server.max_connections") {
		t.Fatalf("a fourth connection got %d %q, want a 503 naming server.max_connections", r.status, r.body)
	}
	if r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the 503 has no nosniff")
	}
	_ = wss[0].ws.Close()
	waitStatus(t, addr, http.StatusOK)
	wss[1].alive()
}

// waitStatus polls /healthz until it answers want.
func waitStatus(t *testing.T, addr string, want int) {
	t.Helper()
	testkit.Await(t, fmt.Sprintf("/healthz answers %d", want), func() ([]rawResp, bool) {
		resps, _ := rawExchange(t, addr, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n")
		return resps, len(resps) == 1 && resps[0].status == want
	})
}

// Connections that say nothing, stop halfway through a request or idle
// after one are closed after server.read_timeout or server.idle_timeout; a
// WebSocket, once upgraded, is not.
func TestSilentConnectionsTimeOut(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.ReadTimeout = 300 * time.Millisecond
	cfg.Server.IdleTimeout = 300 * time.Millisecond
	m := startKoe(t, cfg)
	addr := m.Addr()

	ws := dialGreeted(t, addr)
	conns := openIdleConns(t, addr, 3)
	for i, c := range conns {
		waitClosed(t, c, []string{"silent", "half a request", "idle keep-alive"}[i])
	}
	ws.alive()
}

// syncBuffer is a log sink for a koe running in the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fasthttp's own answers carry koe's headers, and its complaints reach
// koe's log.
func TestHTTPServerLogsThroughSlog(t *testing.T) {
	llm := startLLM(t, nil)
	var logs syncBuffer
	m := &app.Main{Config: testConfig(t, t.TempDir(), llm.URL()), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := dialRaw(t, m.Addr())
	if _, err := io.WriteString(c, "NONSENSE\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("garbage answered %v, %v", resp, err)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("fasthttp's own 400 lacks the security headers: %v", resp.Header)
	}
	waitClosed(t, c, "garbage")
	testkit.Eventually(t, "fasthttp's error is in koe's log", func() bool {
		return strings.Contains(logs.String(), "http server: error when serving connection")
	})
	if !strings.Contains(logs.String(), "open_file_limit=") || !strings.Contains(logs.String(), "max_connections=") {
		t.Errorf("the start-up log does not give the open-file limit and max_connections:\n%s", logs.String())
	}
}
