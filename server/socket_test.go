package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/protocol"
	"koe/server"
)

// The WebSocket side on fakes (see fakes_test.go): what the server does
// with a connection's frames, whatever the session makes of them.

// dialFake connects to /client-ws with query q ("" for none).
func dialFake(t *testing.T, k *fakeKoe, q string, subprotocols ...string) *client {
	t.Helper()
	d := *websocket.DefaultDialer
	d.Subprotocols = subprotocols
	url := "ws://" + k.addr + "/client-ws"
	if q != "" {
		url += "?" + q
	}
	return dialURL(t, &d, url, nil)
}

// refusedDial dials a query that is refused before the upgrade and
// returns the HTTP status and error.
func refusedDial(t *testing.T, k *fakeKoe, q string) (int, string) {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+k.addr+"/client-ws?"+q, nil)
	if err == nil {
		_ = ws.Close()
		t.Fatalf("?%s was accepted", q)
	}
	if resp == nil {
		t.Fatalf("?%s: %v, without an HTTP answer", q, err)
	}
	defer resp.Body.Close()
	var body struct{ Error string }
	if data, rerr := io.ReadAll(resp.Body); rerr == nil {
		_ = jsonUnmarshal(string(data), &body)
	}
	return resp.StatusCode, body.Error
}

// A client connects, is greeted by its session, and each frame it sends
// reaches the session in order; the session's answers come back.
func TestSocketConnectSendAnswer(t *testing.T) {
	k := startFake(t)
	c := dialFake(t, k, "client_uid=desk")
	s := k.sessions.next(t)
	if s.opts.ClientUID != "desk" || s.opts.KoeEvents || s.opts.Logger == nil {
		t.Errorf("session options = %+v", s.opts)
	}
	if m := c.next(); m.typ() != protocol.TypeFullText || m.str("text") != protocol.ConnectionEstablished {
		t.Fatalf("first frame %v, want the greeting", m)
	}
	if m := c.next(); m.typ() != protocol.TypeSetModelAndConf || m.str("client_uid") != "desk" {
		t.Fatalf("second frame %v", m)
	}
	c.send(msg{"type": "text-input", "text": "hello"})
	if m := c.next(); m.typ() != protocol.TypeFullText || m.str("text") != "you said hello" {
		t.Fatalf("answer %v", m)
	}
	if in := <-s.inbound; in.Type != protocol.TypeTextInput || in.Text != "hello" {
		t.Errorf("the session got %+v", in)
	}
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if pcm := <-s.pcm; string(pcm) != "\x01\x02\x03\x04" {
		t.Errorf("the session got audio %v", pcm)
	}

	// Leaving closes the session.
	_ = c.ws.Close()
	<-s.closed

	// koe's own clients ask for its events with the subprotocol.
	kc := dialFake(t, k, "", protocol.Subprotocol)
	if s := k.sessions.next(t); !s.opts.KoeEvents || s.opts.ClientUID == "" {
		t.Errorf("a koe.v1 client's session options = %+v", s.opts)
	}
	if kc.ws.Subprotocol() != protocol.Subprotocol {
		t.Errorf("subprotocol = %q", kc.ws.Subprotocol())
	}
}

// A frame that fails is answered with an error frame naming what was
// sent, and the connection goes on; koe's own failures are not shown.
func TestSocketFailures(t *testing.T) {
	k := startFake(t)
	c := dialFake(t, k, "")
	k.sessions.next(t)
	c.next()
	c.next()
	c.expectError(msg{"type": "text-input", "text": "fail: invalid"}, "text-input: that is not right")
	m := c.expectError(msg{"type": "text-input", "text": "fail: internal"}, "text-input: koe failed to do that; the reason is in its log")
	if strings.Contains(m.str("message"), "disk on fire") {
		t.Errorf("the client was told koe's internals: %v", m)
	}
	c.expectError([]byte(`{"type":`), "invalid message")
	c.expectError([]byte(`{"text":"no type"}`), `it has no "type"`)
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if m := c.next(); m.typ() != "error" || !strings.HasPrefix(m.str("message"), "binary audio: ") {
		t.Errorf("odd audio: %v", m)
	}
	c.send(msg{"type": "text-input", "text": "still there?"})
	if m := c.next(); m.str("text") != "you said still there?" {
		t.Errorf("after the failures: %v", m)
	}
	if logs := k.logs.String(); !strings.Contains(logs, "message failed") || !strings.Contains(logs, "disk on fire") {
		t.Errorf("the internal failure was not logged: %s", logs)
	}
}

// A session replaced by a reconnect of its client_uid, and a hub that is
// shutting down, close the connection with their reason.
func TestSocketClosedByTheSession(t *testing.T) {
	k := startFake(t)
	c := dialFake(t, k, "client_uid=desk")
	s := k.sessions.next(t)
	c.next()
	c.next()
	s.opts.Replaced()
	var ce *websocket.CloseError
	if _, err := c.read(10 * time.Second); !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure || !strings.Contains(ce.Text, "replaced") {
		t.Errorf("replaced: %v", err)
	}
	<-s.closed

	locked(&k.sessions.mu, func() bool { k.sessions.closing = true; return true })
	c = dialFake(t, k, "")
	if _, err := c.read(10 * time.Second); !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Errorf("opened while shutting down: %v", err)
	}
}

// What cannot work is refused before the upgrade, with an HTTP status.
func TestSocketQueryRefused(t *testing.T) {
	k := startFake(t)
	for _, c := range []struct {
		q      string
		status int
		says   string
	}{
		{"client_uid=not%20valid", http.StatusBadRequest, "client_uid must be"},
		{"watch_conf=nobody", http.StatusNotFound, "no such thing here"},
		{"watch_conf=mao&client_uid=desk", http.StatusBadRequest, "a watcher has its own client_uid"},
	} {
		if status, says := refusedDial(t, k, c.q); status != c.status || !strings.Contains(says, c.says) {
			t.Errorf("?%s: %d %q, want %d saying %q", c.q, status, says, c.status, c.says)
		}
	}
	resp, err := http.Get("http://" + k.addr + "/client-ws")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("plain GET: %d, want 426", resp.StatusCode)
	}
}

// A watcher gets what is offered to it without being able to say
// anything; leaving detaches it.
func TestSocketWatcher(t *testing.T) {
	k := startFake(t)
	c := dialFake(t, k, "watch_conf=mao", protocol.Subprotocol)
	var w server.Watcher
	select {
	case w = <-k.watchers.attached:
	case <-time.After(10 * time.Second):
		t.Fatal("no watcher attached")
	}
	opts := locked(&k.watchers.mu, func() server.WatchOptions { return k.watchers.opts[0] })
	if !opts.KoeEvents || opts.ClientUID == "" {
		t.Errorf("watch options = %+v", opts)
	}
	w.Offer(context.Background(), []byte(`{"type":"full-text","text":"from the speaker"}`))
	if m := c.next(); m.str("text") != "from the speaker" {
		t.Fatalf("offered frame: %v", m)
	}
	// A frame of a turn stopped before it was written is not.
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	w.Offer(stopped, []byte(`{"type":"full-text","text":"stopped"}`))
	c.silent()
	c.expectError(msg{"type": "text-input", "text": "hi"}, "text-input: this connection watches character mao and cannot send input")
	if len(k.sessions.opened) != 0 {
		t.Error("a watcher opened a session")
	}
	_ = c.ws.Close()
	select {
	case <-k.watchers.detached:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher was not detached")
	}
}
