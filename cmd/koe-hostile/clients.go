package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// frameTimeout bounds every wait for one message from koe.
const frameTimeout = 60 * time.Second

// dialSession opens a WebSocket and reads koe's connect sequence, which
// ends with control start-mic. Extra subprotocols are offered as given.
func dialSession(ctx context.Context, url string, subprotocols ...string) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, Subprotocols: subprotocols}
	ws, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < 20; i++ {
		m, _, err := readFrame(ws, deadline)
		if err != nil {
			_ = ws.Close()
			return nil, fmt.Errorf("connect sequence: %w", err)
		}
		if m.Type == "control" && m.Text == "start-mic" {
			return ws, nil
		}
	}
	_ = ws.Close()
	return nil, errors.New("connect sequence: no control start-mic in 20 messages")
}

// frame is the part of koe's messages the scenarios look at.
type frame struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Message string `json:"message"`
}

// readFrame reads one text message; binary messages have an empty Type.
func readFrame(ws *websocket.Conn, deadline time.Time) (frame, []byte, error) {
	_ = ws.SetReadDeadline(deadline)
	kind, raw, err := ws.ReadMessage()
	if err != nil {
		return frame{}, nil, err
	}
	var m frame
	if kind == websocket.TextMessage {
		if err := json.Unmarshal(raw, &m); err != nil {
			return frame{}, raw, fmt.Errorf("a message that is not JSON: %w", err)
		}
	}
	return m, raw, nil
}

// pool is a set of WebSockets that sit idle. Each has a reader that throws
// away what koe sends, so that koe's pings are answered as a browser's
// would be.
type pool struct {
	mu      sync.Mutex
	conns   []*websocket.Conn
	errs    []error
	readers sync.WaitGroup
}

// openIdle opens n sessions, dialParallel at a time, stopping early when
// ctx ends.
func openIdle(ctx context.Context, url string, n int) *pool {
	p := &pool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, dialParallel)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ws, err := dialSession(ctx, url)
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				p.errs = append(p.errs, err)
				return
			}
			p.conns = append(p.conns, ws)
			p.readers.Add(1)
			go func() {
				defer p.readers.Done()
				_ = ws.SetReadDeadline(time.Time{})
				for {
					if _, _, err := ws.ReadMessage(); err != nil {
						return
					}
				}
			}()
		}()
	}
	wg.Wait()
	return p
}

func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *pool) firstError() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) == 0 {
		return ""
	}
	return p.errs[0].Error()
}

// close closes every connection and waits for the readers.
func (p *pool) close() {
	p.mu.Lock()
	for _, ws := range p.conns {
		_ = ws.Close()
	}
	p.mu.Unlock()
	p.readers.Wait()
}

// rawConns are TCP connections that never send a byte. Each has a reader
// that records what koe did with it.
type rawConns struct {
	mu      sync.Mutex
	conns   []net.Conn
	failed  []error
	answers map[net.Conn]string // the start of what koe sent, "" for nothing yet
	closed  map[net.Conn]bool   // koe closed it
	readers sync.WaitGroup
}

// openRaw opens n TCP connections to addr, dialParallel at a time.
func openRaw(ctx context.Context, addr string, n int) *rawConns {
	r := &rawConns{answers: map[net.Conn]string{}, closed: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	sem := make(chan struct{}, dialParallel)
	d := net.Dialer{Timeout: 5 * time.Second}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := d.DialContext(ctx, "tcp", addr)
			r.mu.Lock()
			defer r.mu.Unlock()
			if err != nil {
				r.failed = append(r.failed, err)
				return
			}
			r.conns = append(r.conns, c)
			r.readers.Add(1)
			go r.watch(c)
		}()
	}
	wg.Wait()
	return r
}

func (r *rawConns) watch(c net.Conn) {
	defer r.readers.Done()
	buf := make([]byte, 512)
	got := 0
	for {
		n, err := c.Read(buf[got:])
		got += n
		r.mu.Lock()
		if n > 0 {
			r.answers[c] = string(buf[:got])
		}
		if err != nil {
			r.closed[c] = true
		}
		r.mu.Unlock()
		if err != nil || got == len(buf) {
			return
		}
	}
}

// rawCounts is what became of raw connections so far.
type rawCounts struct {
	held, refused503, answered, closed, failed int
}

func (r *rawConns) counts() rawCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	var c rawCounts
	c.failed = len(r.failed)
	for _, conn := range r.conns {
		answer := r.answers[conn]
		switch {
		case len(answer) >= 12 && answer[:12] == "HTTP/1.1 503":
			c.refused503++
		case answer != "":
			c.answered++
		case r.closed[conn]:
			c.closed++
		default:
			c.held++
		}
	}
	return c
}

func (r *rawConns) close() {
	r.mu.Lock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.readers.Wait()
}
