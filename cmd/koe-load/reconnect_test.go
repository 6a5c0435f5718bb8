package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/testkit"
)

// cuttingFront relays TCP to koe and breaks connections where a test
// wants: the first after it has carried a turn's end (between turns), the
// second after it has carried the first audio of a turn (mid-turn); the
// others pass.
type cuttingFront struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	n       int
	wg      sync.WaitGroup
}

func startCuttingFront(t *testing.T, backend string) *cuttingFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &cuttingFront{ln: ln, backend: backend}
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			k := f.n
			f.n++
			f.mu.Unlock()
			f.wg.Go(func() { f.relay(c, k) })
		}
	})
	t.Cleanup(func() { _ = ln.Close(); f.wg.Wait() })
	return f
}

func (f *cuttingFront) relay(c net.Conn, k int) {
	defer c.Close()
	b, err := net.Dial("tcp", f.backend)
	if err != nil {
		return
	}
	defer b.Close()
	marker := map[int][]byte{0: []byte("conversation-chain-end"), 1: []byte(`"type":"audio"`)}[k]
	go func() { _, _ = io.Copy(b, c); _ = b.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := b.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
			if marker != nil && bytes.Contains(buf[:n], marker) {
				return // the connection breaks here
			}
		}
		if err != nil {
			return
		}
	}
}

// TestReconnectGoesOn: a session whose connection breaks between turns
// and then mid-turn reconnects each time, gets its history back whole
// and runs its last turn in it; the report counts one turn cut.
func TestReconnectGoesOn(t *testing.T) {
	testkit.External(t, "a koe binary built with go build")
	o := options{koeBin: buildKoeForLoad(t), n: 1, tps: 100, reply: defaultReply, text: "Plan my week?",
		timeout: testkit.HangGuard, dialRate: 1}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.HangGuard)
	defer cancel()
	tg, err := startTarget(ctx, o, targetKoe)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.stop()
	front := startCuttingFront(t, strings.TrimSuffix(strings.TrimPrefix(tg.url, "ws://"), "/client-ws"))
	f, _ := measureReconnect(o, reconnectOptions{on: true, turns: 3}, "ws://"+front.ln.Addr().String()+"/client-ws")
	f.print("koe", 1, 3, time.Second)
	got := fmt.Sprintf("completed %d cut %d failed %d reconnects %d whole %d lost %d",
		f.completed, f.cut, f.failed, f.reconnects, f.continued, f.lost)
	if want := "completed 2 cut 1 failed 0 reconnects 2 whole 2 lost 0"; got != want {
		t.Fatalf("%s, want %s (errors %v)", got, want, f.errs)
	}
}
