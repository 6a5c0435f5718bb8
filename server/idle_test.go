package server_test

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit"
	"koe/testkit/fakellm"
)

// connWriters counts the goroutines writing to some connection.
func connWriters() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "koe/server.(*conn).writePump")
}

// An idle connection holds no writer goroutine, only its read loop: with
// thousands of idle clients, a parked writer each would cost its stack.
// Keep-alive pings still go out, from a timer, and the connection works.
func TestIdleConnectionsHoldNoWriter(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.PingInterval = 20 * time.Millisecond
	cfg.Server.PongTimeout = 30 * time.Second
	m := startKoe(t, cfg)
	for range 10 {
		dialGreeted(t, m.Addr())
	}
	testkit.Eventually(t, "no writer runs for the idle connections", func() bool { return connWriters() == 0 })

	// A client of its own, to count the pings it answers.
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+m.Addr()+"/client-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var pings atomic.Int32
	enough := make(chan struct{})
	ws.SetPingHandler(func(data string) error {
		if pings.Add(1) == 5 {
			close(enough)
		}
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(10*time.Second))
	})
	readErr := make(chan error, 1)
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				readErr <- err
				return
			}
		}
	}()
	select {
	case <-enough:
	case err := <-readErr:
		t.Fatalf("the connection ended before five pings: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%d pings in 30 s, want 5", pings.Load())
	}

	c := dialGreeted(t, m.Addr())
	c.turn("still there?")
}
