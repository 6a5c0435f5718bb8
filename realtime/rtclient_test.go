package realtime_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit"
)

// update rewrites the golden traces under testdata/ (go test ./realtime
// -run Trace -update); the package's other test files use it too.
var update = flag.Bool("update", false, "rewrite golden traces under testdata/")

// rtClient is a Realtime API client for the tests: a WebSocket to
// /v1/realtime whose events a reader goroutine collects, and every event
// received kept for the traces. Other test files of the package (audio
// input, function calls) use it too.
type rtClient struct {
	t      *testing.T
	ws     *websocket.Conn
	events chan rtEvent
	got    []rtEvent // every event read so far, in order
}

// rtEvent is one server event, decoded, with its raw bytes.
type rtEvent struct {
	m   map[string]any
	raw []byte
	err error
}

func (e rtEvent) typ() string { s, _ := e.m["type"].(string); return s }

// str returns a string at a dotted path ("response.id").
func (e rtEvent) str(path string) string {
	s, _ := e.at(path).(string)
	return s
}

// at returns the value at a dotted path, or nil.
func (e rtEvent) at(path string) any {
	var v any = e.m
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// rtDial connects to koe's /v1/realtime at addr with query (e.g.
// "model=x"), header and subprotocols; it fails the test if the upgrade
// is refused.
func rtDial(t *testing.T, addr, query string, header http.Header, protocols ...string) *rtClient {
	t.Helper()
	c, resp, err := rtTryDial(t, addr, query, header, protocols...)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial /v1/realtime: %v (HTTP %d)", err, status)
	}
	return c
}

// rtTryDial is rtDial that returns the refusal.
func rtTryDial(t *testing.T, addr, query string, header http.Header, protocols ...string) (*rtClient, *http.Response, error) {
	t.Helper()
	d := *websocket.DefaultDialer
	d.Subprotocols = protocols
	url := "ws://" + addr + "/v1/realtime"
	if query != "" {
		url += "?" + query
	}
	ws, resp, err := d.Dial(url, header)
	if err != nil {
		return nil, resp, err
	}
	c := &rtClient{t: t, ws: ws, events: make(chan rtEvent, 4096)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, data, err := ws.ReadMessage()
			e := rtEvent{raw: data, err: err}
			if err == nil {
				if jerr := json.Unmarshal(data, &e.m); jerr != nil {
					e.err = fmt.Errorf("event is not JSON: %w: %s", jerr, data)
				}
			}
			c.events <- e
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = ws.Close(); <-done })
	return c, resp, nil
}

// next returns the next event.
func (c *rtClient) next() rtEvent {
	c.t.Helper()
	select {
	case e := <-c.events:
		if e.err != nil {
			c.t.Fatalf("reading events: %v", e.err)
		}
		c.got = append(c.got, e)
		return e
	case <-time.After(testkit.HangGuard):
		c.t.Fatalf("no event within %s; got so far: %s", testkit.HangGuard, c.types())
		return rtEvent{}
	}
}

// until reads events up to and including the first of type typ.
func (c *rtClient) until(typ string) rtEvent {
	c.t.Helper()
	for {
		if e := c.next(); e.typ() == typ {
			return e
		}
	}
}

// expect reads the next event and fails unless it is of type typ.
func (c *rtClient) expect(typ string) rtEvent {
	c.t.Helper()
	e := c.next()
	if e.typ() != typ {
		c.t.Fatalf("got %s, want %s: %s", e.typ(), typ, e.raw)
	}
	return e
}

// send writes a client event.
func (c *rtClient) send(v any) {
	c.t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(data)
}

func (c *rtClient) sendRaw(data []byte) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// types lists the types of the events read so far.
func (c *rtClient) types() string {
	var s []string
	for _, e := range c.got {
		s = append(s, e.typ())
	}
	return strings.Join(s, " ")
}

// say adds a user text item and asks for a response.
func (c *rtClient) say(text string) {
	c.t.Helper()
	c.send(map[string]any{"type": "conversation.item.create", "event_id": "ev_item",
		"item": map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}})
	c.send(map[string]any{"type": "response.create", "event_id": "ev_resp"})
}
