package server_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

var update = flag.Bool("update", false, "rewrite golden traces under testdata/")

// The shared harness, under the names these tests use.
var (
	testLogger     = koetest.Logger
	startLLM       = koetest.StartLLM
	testConfig     = koetest.Config
	withFakeSpeech = koetest.WithFakeSpeech
	startKoe       = koetest.StartKoe
)

// client is a WebSocket client that reads with a deadline so that a missing
// frame fails the test instead of hanging it.
type client struct {
	t      *testing.T
	ws     *websocket.Conn
	frames chan frameOrErr // filled by the client's reader goroutine
	mu     sync.Mutex
	trace  []string // every frame, in and out, when tracing
	tr     bool
}

type frameOrErr struct {
	data []byte
	err  error
}

// dial connects as a stock OLV client does: no subprotocol, so koe sends
// only the OLV message set.
func dial(t *testing.T, addr string, header http.Header) *client {
	t.Helper()
	return dialWith(t, websocket.DefaultDialer, addr, header)
}

// dialKoe connects as koe's own clients do, asking for koe's events
// (token, memory-state) with the koe.v1 subprotocol, and consumes the
// connect sequence.
func dialKoe(t *testing.T, addr string) *client {
	t.Helper()
	d := *websocket.DefaultDialer
	d.Subprotocols = []string{"koe.v1"}
	c := dialWith(t, &d, addr, nil)
	if got := c.ws.Subprotocol(); got != "koe.v1" {
		t.Fatalf("subprotocol = %q, want koe.v1", got)
	}
	for i := 0; i < 5; i++ {
		c.next()
	}
	return c
}

func dialWith(t *testing.T, d *websocket.Dialer, addr string, header http.Header) *client {
	t.Helper()
	return dialURL(t, d, "ws://"+addr+"/client-ws", header)
}

// dialURL connects to a full WebSocket URL (a query on /client-ws).
func dialURL(t *testing.T, d *websocket.Dialer, url string, header http.Header) *client {
	t.Helper()
	ws, resp, err := d.Dial(url, header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (HTTP %d)", err, status)
	}
	c := &client{t: t, ws: ws, frames: make(chan frameOrErr, 4096)}
	// One reader goroutine: gorilla's read deadlines break the connection
	// for good, so waiting with a timeout happens on the channel instead.
	// It stops when the socket is closed (at cleanup at the latest).
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			typ, data, err := ws.ReadMessage()
			if err == nil && typ != websocket.TextMessage {
				err = fmt.Errorf("got a binary frame")
			}
			c.frames <- frameOrErr{data, err}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = ws.Close(); <-done })
	return c
}

// dialGreeted dials and consumes the five-frame connect sequence.
func dialGreeted(t *testing.T, addr string) *client {
	c := dial(t, addr, nil)
	for i := 0; i < 5; i++ {
		c.next()
	}
	return c
}

type msg map[string]any

func (m msg) typ() string         { s, _ := m["type"].(string); return s }
func (m msg) str(k string) string { s, _ := m[k].(string); return s }

func (c *client) send(v any) {
	c.t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(data)
}

func (c *client) sendRaw(data []byte) {
	c.t.Helper()
	if c.tr {
		c.record(">", data)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next returns the next frame, failing the test after 10 s.
func (c *client) next() msg {
	c.t.Helper()
	m, err := c.read(10 * time.Second)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return m
}

var errNoFrame = errors.New("no frame in time")

func (c *client) read(wait time.Duration) (msg, error) {
	var f frameOrErr
	select {
	case f = <-c.frames:
	case <-time.After(wait):
		return nil, errNoFrame
	}
	if f.err != nil {
		c.frames <- f // every later read sees the same end
		return nil, f.err
	}
	data := f.data
	if c.tr {
		c.record("<", data)
	}
	var m msg
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("frame is not JSON: %q", data)
	}
	return m, nil
}

// until reads frames up to and including the first one that satisfies
// stop, and returns them all.
func (c *client) until(stop func(msg) bool) []msg {
	c.t.Helper()
	var got []msg
	for {
		m := c.next()
		got = append(got, m)
		if stop(m) {
			return got
		}
	}
}

func isType(typ string) func(msg) bool { return func(m msg) bool { return m.typ() == typ } }

func isControl(text string) func(msg) bool {
	return func(m msg) bool { return m.typ() == "control" && m.str("text") == text }
}

// silent asserts that koe sends nothing more for what happened so far: it
// sends a heartbeat, and the next frame must be its answer. koe handles a
// client's messages in order, so anything the earlier ones caused (a
// second chain-end, a new turn) would come first. An event, not a time.
func (c *client) silent() {
	c.t.Helper()
	c.send(msg{"type": "heartbeat"})
	if m := c.next(); m.typ() != "heartbeat-ack" {
		c.t.Fatalf("expected nothing before heartbeat-ack, got %v", m)
	}
}

// turn sends text and plays the part of the OLV client until chain-end.
func (c *client) turn(text string) []msg {
	c.t.Helper()
	c.send(msg{"type": "text-input", "text": text, "images": []any{}})
	var got []msg
	for {
		m := c.next()
		got = append(got, m)
		switch {
		case m.typ() == "backend-synth-complete":
			c.send(msg{"type": "frontend-playback-complete"})
		case m.typ() == "error":
			c.t.Fatalf("turn %q: error frame: %v", text, m)
		case isControl("conversation-chain-end")(m):
			return got
		}
	}
}

// request sends a message and returns the next frame of type want.
func (c *client) request(v msg, want string) msg {
	c.t.Helper()
	c.send(v)
	got := c.until(isType(want))
	return got[len(got)-1]
}

func (c *client) expectError(v any, contains string) msg {
	c.t.Helper()
	switch raw := v.(type) {
	case []byte:
		c.sendRaw(raw)
	default:
		c.send(v)
	}
	m := c.next()
	if m.typ() != "error" || !strings.Contains(m.str("message"), contains) {
		c.t.Fatalf("want an error frame containing %q, got %v", contains, m)
	}
	return m
}

// alive proves the connection still works after bad input.
func (c *client) alive() {
	c.t.Helper()
	if m := c.request(msg{"type": "heartbeat"}, "heartbeat-ack"); m.typ() != "heartbeat-ack" {
		c.t.Fatalf("no heartbeat-ack: %v", m)
	}
}

func (c *client) record(dir string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trace = append(c.trace, dir+" "+string(data))
}

// normalise replaces per-run values (ids, times) so traces compare.
func normalise(lines []string) []string {
	ids := map[string]string{}
	idKeys := map[string]bool{"client_uid": true, "history_uid": true, "uid": true, "thread_id": true, "run_id": true}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			// Sorted, so that ids are numbered in the same order every run.
			for _, k := range slices.Sorted(maps.Keys(x)) {
				val := x[k]
				s, isStr := val.(string)
				switch {
				case idKeys[k] && isStr && s != "":
					if _, ok := ids[s]; !ok {
						ids[s] = fmt.Sprintf("<id-%d>", len(ids)+1)
					}
					x[k] = ids[s]
				case (k == "timestamp" || k == "created_at") && isStr:
					x[k] = "<time>"
				case k == "prompt_tokens" || k == "total_tokens":
					// The prompt holds today's date, whose length varies.
					x[k] = "<count>"
				case k == "url" && isStr:
					// Image URLs hold history ids.
					for id, name := range ids {
						s = strings.ReplaceAll(s, id, name)
					}
					x[k] = s
				case k == "audio" && !isStr && val != nil:
					// Microphone samples sent in: their count is enough.
					n := 0
					if arr, ok := val.([]any); ok {
						n = len(arr)
					}
					x[k] = fmt.Sprintf("<%d samples>", n)
				case k == "audio" && isStr:
					// Keep traces readable: a WAV is its size and a hash.
					wav, err := base64.StdEncoding.DecodeString(s)
					sum := sha256.Sum256(wav)
					x[k] = fmt.Sprintf("<wav %d bytes sha256:%x err:%v>", len(wav), sum[:6], err)
				default:
					x[k] = walk(val)
				}
			}
			// A listing of histories active in the same second is
			// ordered by random ids: compare it sorted (the e2e tests
			// check the order itself).
			if list, ok := x["histories"].([]any); ok {
				sort.Slice(list, func(i, j int) bool {
					return fmt.Sprint(list[i].(map[string]any)["uid"]) < fmt.Sprint(list[j].(map[string]any)["uid"])
				})
			}
			return x
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
			return x
		}
		return v
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		dir, body, _ := strings.Cut(l, " ")
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			out = append(out, l)
			continue
		}
		var b strings.Builder
		enc := json.NewEncoder(&b) // maps encode with sorted keys
		enc.SetEscapeHTML(false)
		_ = enc.Encode(walk(v))
		out = append(out, dir+" "+strings.TrimSuffix(b.String(), "\n"))
	}
	return out
}

// golden compares lines with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, lines []string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	got := strings.Join(lines, "\n") + "\n"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./server -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
		for i := 0; i < len(wl) || i < len(gl); i++ {
			var w, g string
			if i < len(wl) {
				w = wl[i]
			}
			if i < len(gl) {
				g = gl[i]
			}
			if w != g {
				t.Fatalf("trace differs from %s at line %d:\nwant: %s\ngot:  %s\n(run with -update if the change is intended)", path, i+1, w, g)
			}
		}
	}
}

// types lists the frame types (control frames with their text).
func types(ms []msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.typ()
		if m.typ() == "control" {
			out[i] += ":" + m.str("text")
		}
	}
	return out
}

// contentOf joins what the LLM received, for assertions on the context.
func contentOf(r fakellm.Request) string {
	var b strings.Builder
	for _, m := range r.Messages {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
	}
	return b.String()
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
