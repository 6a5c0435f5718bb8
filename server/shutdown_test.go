package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/app"
)

// Connections that hold no request in a handler are closed at once when
// koe shuts down, so that they cannot hold shutdown up until its timeout:
// silent ones, ones that sent half a request, and idle keep-alive ones.
func TestShutdownClosesIdleConnections(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.ShutdownTimeout = 60 * time.Second // a hang guard only
	m := startKoe(t, cfg)
	addr := m.Addr()

	ws := dialGreeted(t, addr)
	conns := openIdleConns(t, addr, 3)
	if err := m.Close(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for i, c := range conns {
		waitClosed(t, c, []string{"silent", "half a request", "idle keep-alive"}[i])
	}
	if _, err := ws.read(20 * time.Second); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("WebSocket saw %v, want close 1001", err)
	}
}

// openIdleConns opens n connections in turn silent, stopped in the middle
// of a request's headers, and idle after one complete request.
func openIdleConns(t testing.TB, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c := dialRaw(t, addr)
		switch i % 3 {
		case 1:
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\nX-Half: "); err != nil {
				t.Fatal(err)
			}
		case 2:
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			_ = c.SetReadDeadline(time.Time{})
		}
		conns = append(conns, c)
	}
	return conns
}

// BenchmarkShutdownIdleSockets measures a shutdown with 1,000 idle
// connections open (a third each silent, half a request, idle keep-alive).
func BenchmarkShutdownIdleSockets(b *testing.B) {
	llm := startLLM(b, nil)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg := testConfig(b, b.TempDir(), llm.URL())
		cfg.Server.ShutdownTimeout = 60 * time.Second
		m := &app.Main{Config: cfg, Logger: testLogger(b), Getenv: func(string) string { return "" }}
		if err := m.Open(); err != nil {
			b.Fatal(err)
		}
		conns := openIdleConns(b, m.Addr(), 1000)
		b.StartTimer()
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		for _, c := range conns {
			_ = c.Close()
		}
	}
}
