package static_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit"
)

// wsFront stands in front of a koe as a load balancer does: pages load
// through it and their WebSockets are relayed to koe frame by frame. A
// test makes it do what a restart does to the browser's connection:
// restart closes every connection with the code a draining koe sends
// (1012, "service restart"), drop breaks them without a close frame
// (1006 to the page), and hold keeps new connections waiting until
// release, as while no instance answers.
type wsFront struct {
	t       *testing.T
	backend string // koe's host:port
	srv     *httptest.Server

	mu      sync.Mutex
	live    map[*frontPair]bool
	held    chan struct{} // not nil: new connections wait until it closes
	queries []string      // each WebSocket's query, in order
}

type frontPair struct {
	client, server *websocket.Conn
	once           sync.Once
}

// close ends both sides; a code of 0 breaks the page's side without a
// close frame.
func (p *frontPair) close(code int, reason string) {
	p.once.Do(func() {
		if code != 0 {
			_ = p.client.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
		}
		_ = p.client.Close()
		_ = p.server.Close()
	})
}

func startWSFront(t *testing.T, backend string) *wsFront {
	t.Helper()
	f := &wsFront{t: t, backend: backend, live: map[*frontPair]bool{}}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: backend})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !websocket.IsWebSocketUpgrade(r) {
			proxy.ServeHTTP(w, r)
			return
		}
		f.relay(w, r)
	}))
	t.Cleanup(func() {
		f.release()
		f.mu.Lock()
		pairs := make([]*frontPair, 0, len(f.live))
		for p := range f.live {
			pairs = append(pairs, p)
		}
		f.mu.Unlock()
		for _, p := range pairs {
			p.close(websocket.CloseGoingAway, "test over")
		}
		f.srv.Close()
	})
	return f
}

func (f *wsFront) addr() string { return f.srv.Listener.Addr().String() }

func (f *wsFront) relay(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	held := f.held
	f.queries = append(f.queries, r.URL.RawQuery)
	f.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
	}
	dialer := websocket.Dialer{HandshakeTimeout: guard, Subprotocols: websocket.Subprotocols(r)}
	h := http.Header{}
	for _, k := range []string{"Origin", "Cookie", "Authorization"} {
		if v := r.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	server, resp, err := dialer.DialContext(r.Context(), "ws://"+f.backend+r.URL.RequestURI(), h)
	if err != nil {
		status := http.StatusBadGateway
		if resp != nil {
			status = resp.StatusCode
		}
		http.Error(w, "koe: "+err.Error(), status)
		return
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	if sp := server.Subprotocol(); sp != "" {
		up.Subprotocols = []string{sp}
	}
	client, err := up.Upgrade(w, r, nil)
	if err != nil {
		_ = server.Close()
		return
	}
	p := &frontPair{client: client, server: server}
	f.mu.Lock()
	f.live[p] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.live, p)
		f.mu.Unlock()
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pump(server, client, p)
	}()
	pump(client, server, p)
	<-done
}

// pump copies frames from one side to the other until either ends; a
// close from koe reaches the page with its code.
func pump(from, to *websocket.Conn, p *frontPair) {
	for {
		typ, data, err := from.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) && from == p.server {
				p.close(ce.Code, ce.Text)
			} else {
				p.close(0, "")
			}
			return
		}
		if err := to.WriteMessage(typ, data); err != nil {
			p.close(0, "")
			return
		}
	}
}

func (f *wsFront) pairs() []*frontPair {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*frontPair, 0, len(f.live))
	for p := range f.live {
		out = append(out, p)
	}
	return out
}

// restart closes every page's connection as a draining koe does and
// koe's side with it.
func (f *wsFront) restart() {
	for _, p := range f.pairs() {
		p.close(1012, "service restart")
	}
}

// drop breaks every connection with no close frame.
func (f *wsFront) drop() {
	for _, p := range f.pairs() {
		p.close(0, "")
	}
}

func (f *wsFront) hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held == nil {
		f.held = make(chan struct{})
	}
}

func (f *wsFront) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held != nil {
		close(f.held)
		f.held = nil
	}
}

// connections is how many WebSockets reached the front, and their queries.
func (f *wsFront) connections() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

// waitConnections waits until n WebSockets have reached the front.
func (f *wsFront) waitConnections(n int) []string {
	f.t.Helper()
	return testkit.Await(f.t, fmt.Sprintf("%d WebSockets at the front", n), func() ([]string, bool) {
		q := f.connections()
		return q, len(q) >= n
	})
}
