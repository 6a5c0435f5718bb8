package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"koe/testkit"
	"koe/testkit/fakellm"
)

// BenchmarkIdleSession reports what one idle WebSocket session costs koe
// in this process, once its connect sequence is written: heap bytes (live
// objects, after a collection) and goroutine stack bytes, over b.N
// sessions held open at once. Run it with a fixed count for a steady
// figure:
//
//	go test ./server -run '^$' -bench IdleSession -benchtime 2000x
//
// The clients are bare sockets that complete the upgrade and then read
// nothing, so that they hold no goroutine here and only their socket's
// few hundred bytes of heap, which the figure includes. koe-hostile's idle
// scenario gives the resident memory of a real koe process.
func BenchmarkIdleSession(b *testing.B) {
	llm, err := fakellm.Start("127.0.0.1:0", fakellm.Echo(0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = llm.Close() })
	addr := startBenchServer(b, llm.URL(), newInstantEngine(b))
	// The first session builds what every later one shares.
	_ = dialBench(b, addr).Close()
	waitIdle(b, addr, 0)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 0, b.N)
	b.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	b.ResetTimer()
	for range b.N {
		conns = append(conns, upgradeOnly(b, addr))
	}
	b.StopTimer()
	waitIdle(b, addr, b.N)
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := float64(b.N)
	b.ReportMetric((float64(after.HeapAlloc)-float64(before.HeapAlloc))/n, "heap-B/session")
	b.ReportMetric((float64(after.StackInuse)-float64(before.StackInuse))/n, "stack-B/session")
	b.ReportMetric(float64(after.NumGC-before.NumGC), "GCs")
}

// upgradeOnly opens a WebSocket and reads only the upgrade's answer.
func upgradeOnly(b *testing.B, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatalf("dial (raise the open-file limit for large -benchtime counts): %v", err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET /client-ws HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		b.Fatal(err)
	}
	// Byte by byte, so that nothing after the answer's head is consumed.
	r := bufio.NewReaderSize(c, 16)
	var head strings.Builder
	for !strings.HasSuffix(head.String(), "\r\n\r\n") {
		ch, err := r.ReadByte()
		if err != nil {
			b.Fatalf("upgrade: %v (got %q)", err, head.String())
		}
		head.WriteByte(ch)
	}
	if !strings.HasPrefix(head.String(), "HTTP/1.1 101") {
		b.Fatalf("upgrade answered %q", head.String())
	}
	_ = c.SetDeadline(time.Time{})
	return c
}

// waitIdle waits until koe counts n sessions and no connection has a
// writer running (every connect sequence is written).
func waitIdle(b *testing.B, addr string, n int) {
	type state struct {
		sessions, writers int
		err               error
	}
	testkit.Await(b, fmt.Sprintf("koe counts %d sessions and no writer runs", n), func() (state, bool) {
		got, err := healthSessions(addr)
		st := state{got, int(connWriters()), err}
		return st, err == nil && got == n && st.writers == 0
	})
}

func healthSessions(addr string) (int, error) {
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Sessions int `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, fmt.Errorf("healthz: %w", err)
	}
	return h.Sessions, nil
}
