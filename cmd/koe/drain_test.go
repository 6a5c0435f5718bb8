package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe"
	"koe/bolt"
	"koe/testkit/fakellm"
)

// The drain before a restart, in a real koe process: SIGTERM lets the
// reply in flight finish and sends everyone else elsewhere; a second
// SIGTERM cuts it at once. Every wait is for an event: a log line of the
// child, a frame, the fake LLM reaching the held chunk.

// drainedReply is the reply the fake LLM streams; it stops before
// heldChunk until the test lets it go on.
var drainedReply = []string{"The ", "whole ", "reply ", "comes ", "through."}

const heldChunk = 2

// heldLLM is a fake LLM whose reply to the question waits before
// heldChunk: reached says it got there, release lets it go on.
type heldLLM struct {
	*fakellm.Server
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func startHeldLLM(t *testing.T, question string) *heldLLM {
	t.Helper()
	h := &heldLLM{reached: make(chan struct{}, 1), release: make(chan struct{})}
	srv, err := fakellm.Start("127.0.0.1:0", func(r fakellm.Request) fakellm.Reply {
		if len(r.Messages) == 0 || !strings.Contains(r.Messages[len(r.Messages)-1].Content, question) {
			return fakellm.Reply{Tokens: []string{"ok"}}
		}
		return fakellm.Reply{Tokens: drainedReply, BeforeChunk: func(i int) {
			if i == heldChunk {
				h.reached <- struct{}{}
				<-h.release
			}
		}}
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Server = srv
	t.Cleanup(func() { _ = srv.Close() })
	t.Cleanup(h.letGo) // before Close: a held handler would keep it waiting
	return h
}

// waitReached waits until the reply has reached the held chunk.
func (h *heldLLM) waitReached(t *testing.T) {
	t.Helper()
	select {
	case <-h.reached:
	case <-time.After(time.Minute):
		t.Fatal("the reply never reached the held chunk")
	}
}

func (h *heldLLM) letGo() { h.once.Do(func() { close(h.release) }) }

// drainingKoe is koe in a child process whose log lines a test waits for.
type drainingKoe struct {
	cmd    *exec.Cmd
	addr   string
	data   string
	exited chan struct{}
	err    error

	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced at each line
}

func startDrainingKoe(t *testing.T, llm *fakellm.Server) *drainingKoe {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf.yaml")
	k := &drainingKoe{data: filepath.Join(dir, "data"), exited: make(chan struct{}), more: make(chan struct{})}
	yaml := fmt.Sprintf("data_dir: %s\ncharacters_dir: %s\nlog_level: info\nserver:\n  backgrounds_dir: %s\ncharacter:\n  llm:\n    base_url: %s\n    model: %s\n  tts:\n    engine: none\n",
		k.data, filepath.Join(dir, "characters"), filepath.Join(dir, "bg"), llm.URL(), fakellm.ModelID)
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	k.cmd = exec.Command(os.Args[0], "-config", conf, "-port", "0")
	k.cmd.Env = append(os.Environ(), childEnv+"=1")
	stderr, err := k.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			k.mu.Lock()
			k.lines = append(k.lines, sc.Text())
			close(k.more)
			k.more = make(chan struct{})
			k.mu.Unlock()
		}
		k.err = k.cmd.Wait()
		close(k.exited)
	}()
	t.Cleanup(func() {
		_ = k.cmd.Process.Kill()
		<-k.exited
		if t.Failed() {
			t.Logf("koe's log:\n%s", strings.Join(k.log(), "\n"))
		}
	})
	m := listening.FindStringSubmatch(k.waitLine(t, "koe is listening"))
	if m == nil {
		t.Fatal("koe's listening line has no address")
	}
	k.addr = m[1]
	return k
}

func (k *drainingKoe) log() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.lines...)
}

// waitLine waits for a log line holding text and returns it.
func (k *drainingKoe) waitLine(t *testing.T, text string) string {
	t.Helper()
	guard := time.After(time.Minute)
	for seen, gone := 0, false; ; {
		k.mu.Lock()
		lines, more := k.lines[seen:], k.more
		seen = len(k.lines)
		k.mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, text) {
				return l
			}
		}
		if gone {
			t.Fatalf("koe exited (%v) without logging %q", k.err, text)
		}
		select {
		case <-more:
		case <-k.exited:
			gone = true // every line is read by now: look once more
		case <-guard:
			t.Fatalf("koe did not log %q", text)
		}
	}
}

func (k *drainingKoe) signal(t *testing.T) {
	t.Helper()
	if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// waitExit waits for koe to exit and fails unless it exited cleanly.
func (k *drainingKoe) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-k.exited:
	case <-time.After(time.Minute):
		t.Fatal("koe did not exit")
	}
	if k.err != nil {
		t.Fatalf("koe exited with %v", k.err)
	}
}

// stored is the history's records once koe has exited.
func (k *drainingKoe) stored(t *testing.T, history string) []koe.Record {
	t.Helper()
	store, err := bolt.Open(filepath.Join(k.data, "koe.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	records, err := store.Messages(t.Context(), "koe_default", history)
	if err != nil {
		t.Fatal(err)
	}
	return records
}

// drainClient is one WebSocket client of the draining koe.
type drainClient struct {
	t  *testing.T
	ws *websocket.Conn
}

// dialDraining connects a client; koeEvents offers koe.v1, for the
// streamed deltas as token frames.
func dialDraining(t *testing.T, addr string, koeEvents ...bool) *drainClient {
	t.Helper()
	d := *websocket.DefaultDialer
	if len(koeEvents) > 0 && koeEvents[0] {
		d.Subprotocols = []string{"koe.v1"}
	}
	ws, _, err := d.Dial("ws://"+addr+"/client-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	return &drainClient{t: t, ws: ws}
}

func (c *drainClient) send(v map[string]any) {
	c.t.Helper()
	data, _ := json.Marshal(v)
	if err := c.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		c.t.Fatal(err)
	}
}

// until reads frames until one of type typ (with text, if given) and
// returns the frames read; a read error (the close) is returned as is.
func (c *drainClient) until(typ, text string) ([]map[string]any, error) {
	var got []map[string]any
	for {
		_ = c.ws.SetReadDeadline(time.Now().Add(time.Minute))
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return got, err
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return got, err
		}
		got = append(got, m)
		if m["type"] == typ && (text == "" || m["text"] == text) {
			return got, nil
		}
	}
}

func (c *drainClient) must(typ, text string) []map[string]any {
	c.t.Helper()
	got, err := c.until(typ, text)
	if err != nil {
		c.t.Fatalf("waiting for %s %s: %v", typ, text, err)
	}
	return got
}

// closedWith reads until the socket closes and returns the close.
func (c *drainClient) closedWith() *websocket.CloseError {
	c.t.Helper()
	_, err := c.until("", "never")
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		c.t.Fatalf("socket ended with %v, not a close", err)
	}
	return ce
}

// newHistory starts a history for the client's turns and returns its uid.
func (c *drainClient) newHistory() string {
	c.t.Helper()
	c.send(map[string]any{"type": "create-new-history"})
	got := c.must("new-history-created", "")
	uid, _ := got[len(got)-1]["history_uid"].(string)
	return uid
}

func isRestart(ce *websocket.CloseError) bool {
	return ce.Code == websocket.CloseServiceRestart && ce.Text == "service restart"
}

// drainingTurn starts koe, runs a turn asking question in a new history
// until its reply is held in flight, and sends koe its first SIGTERM.
func drainingTurn(t *testing.T, question string) (*heldLLM, *drainingKoe, *drainClient, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts koe in a child process")
	}
	llm := startHeldLLM(t, question)
	k := startDrainingKoe(t, llm.Server)
	c := dialDraining(t, k.addr, true)
	history := c.newHistory()
	c.send(map[string]any{"type": "text-input", "text": question})
	llm.waitReached(t)
	// koe has read the reply up to the hold once its client has the last
	// delta before it: a turn cut then has something heard to store.
	for {
		got := c.must("token", "")
		if got[len(got)-1]["content"] == drainedReply[heldChunk-1] {
			break
		}
	}
	k.signal(t)
	k.waitLine(t, "drain started")
	return llm, k, c, history
}

// SIGTERM while a reply is in flight: /readyz answers 503 at once, a new
// connection is sent elsewhere with 1012, the reply finishes and is stored
// whole, its client is then sent elsewhere too, and koe exits.
func TestSIGTERMDrainsTheReplyInFlight(t *testing.T) {
	const question = "please drain me"
	llm, k, c, history := drainingTurn(t, question)
	resp, err := http.Get("http://" + k.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || ready["status"] != "draining" {
		t.Errorf("/readyz while draining = %d %v, want 503 draining", resp.StatusCode, ready)
	}
	if ce := dialDraining(t, k.addr).closedWith(); !isRestart(ce) {
		t.Errorf("a new connection while draining got %v, want 1012 service restart", ce)
	}

	llm.letGo()
	c.must("backend-synth-complete", "")
	c.send(map[string]any{"type": "frontend-playback-complete"})
	c.must("control", "conversation-chain-end")
	if ce := c.closedWith(); !isRestart(ce) {
		t.Errorf("after its turn the client got %v, want 1012 service restart", ce)
	}
	k.waitExit(t)
	k.waitLine(t, `finished=1 cut=0`) // msg="drain finished" instance=… finished=1 cut=0

	records := k.stored(t, history)
	whole := strings.Join(drainedReply, "")
	if n := len(records); n < 2 || records[n-1].Role != koe.RoleAI || records[n-1].Content != whole || records[n-1].Interrupted {
		t.Fatalf("stored after the drain: %+v; want the whole reply %q, not interrupted", records, whole)
	}
}

// A second SIGTERM during the drain stops at once: the reply in flight is
// cut, stored as heard (interrupted), its client is sent elsewhere, and
// koe exits without waiting for server.drain_timeout.
func TestSecondSIGTERMCutsTheDrain(t *testing.T) {
	const question = "cut me short"
	_, k, c, history := drainingTurn(t, question)
	k.signal(t)
	if ce := c.closedWith(); !isRestart(ce) {
		t.Errorf("the cut turn's client got %v, want 1012 service restart", ce)
	}
	k.waitExit(t)
	k.waitLine(t, `finished=0 cut=1`) // msg="drain finished" instance=… finished=0 cut=1

	records := k.stored(t, history)
	n := len(records)
	if n < 2 || records[n-2].Role != koe.RoleHuman || records[n-2].Content != question ||
		records[n-1].Role != koe.RoleAI || !records[n-1].Interrupted {
		t.Fatalf("stored after the cut: %+v; want the question and the reply as heard, interrupted", records)
	}
}
