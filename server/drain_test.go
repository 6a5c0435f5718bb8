package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe"
	"koe/protocol"
	"koe/server"
	"koe/testkit/logwatch"
)

// The drain before a restart (drain.go) on fakes whose turns last until the
// test ends them: who is sent elsewhere (1012, 503) and when, and that the
// turns running finish.

// drainKoe is a served server whose sessions and chats run turns that
// last (heldSessions, heldChats).
type drainKoe struct {
	srv      *server.Server
	addr     string
	sessions *heldSessions
	chats    *heldChats
	metrics  *drainCounts
	log      *logwatch.Handler
	shutdown sync.Once
}

func startDrainKoe(t *testing.T) *drainKoe {
	t.Helper()
	k := &drainKoe{
		sessions: &heldSessions{opened: make(chan *heldSession, 16)},
		chats:    &heldChats{started: make(chan *heldChat, 16)},
		metrics:  &drainCounts{},
		log:      logwatch.New(t, "koe"),
	}
	k.srv = server.New(server.Options{
		Config:      server.DefaultConfig(),
		Sessions:    k.sessions,
		Chats:       k.chats,
		Histories:   &fakeHistories{},
		Prompts:     &fakePrompts{saved: map[string]string{}},
		Documents:   &fakeDocuments{},
		Attachments: &fakeDocuments{},
		Memories:    &fakeMemories{},
		Watchers:    &fakeWatchers{attached: make(chan server.Watcher, 4), detached: make(chan struct{}, 4)},
		Overlays:    fakeOverlays{},
		LiveChat:    &fakeLive{},
		Metrics:     k.metrics,
		Logger:      slog.New(k.log),
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- k.srv.Serve(ln) }()
	k.addr = ln.Addr().String()
	t.Cleanup(func() {
		k.stop(t)
		<-served
	})
	return k
}

// stop shuts the server down (once), as app does after a drain.
func (k *drainKoe) stop(t *testing.T) {
	k.shutdown.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := k.srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
}

// dialDrain connects as client uid and returns the session opened for it,
// its greeting read.
func (k *drainKoe) dial(t *testing.T, uid string) (*client, *heldSession) {
	t.Helper()
	c := dialURL(t, websocket.DefaultDialer, "ws://"+k.addr+"/client-ws?client_uid="+uid, nil)
	s := k.sessions.next(t)
	if m := c.next(); m.str("text") != "hello" {
		t.Fatalf("greeting = %v", m)
	}
	return c, s
}

// startTurn sends text-input and waits until its turn runs.
func startTurn(t *testing.T, c *client, text string) {
	t.Helper()
	c.send(map[string]any{"type": "text-input", "text": text})
	if m := c.next(); m.str("text") != "thinking about "+text {
		t.Fatalf("turn start = %v", m)
	}
}

// sentElsewhere reads until the socket closes and fails unless the close
// is 1012 "service restart" right after the frames want (by text).
func sentElsewhere(t *testing.T, c *client, want ...string) {
	t.Helper()
	var got []string
	for {
		m, err := c.read(30 * time.Second)
		if err == nil {
			got = append(got, m.str("text"))
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseServiceRestart || ce.Text != "service restart" {
			t.Fatalf("socket ended with %v after %q; want close 1012 \"service restart\"", err, got)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("frames before the close = %q, want %q", got, want)
		}
		return
	}
}

// probe GETs path and returns the status and JSON body.
func (k *drainKoe) probe(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+k.addr+path, nil)
	a := exchange(t, req)
	var body map[string]any
	a.json(t, &body)
	return a.status, body
}

// On the first signal: /readyz says draining, /healthz stays up, idle
// sessions and new connections are sent elsewhere with 1012 at once, a chat
// request is refused from its headers, an input that would start a turn
// closes its session before the turn starts, and the turns running finish,
// each session closed with 1012 after its turn's last frame.
func TestDrainSendsClientsElsewhereAndLetsTurnsFinish(t *testing.T) {
	k := startDrainKoe(t)
	idle, _ := k.dial(t, "idle")
	busy, busySession := k.dial(t, "busy")
	startTurn(t, busy, "a long question")
	other, otherSession := k.dial(t, "other")
	startTurn(t, other, "first")
	chatDone := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+k.addr+"/api/chat/stream", strings.NewReader(`{"message":"slow"}`))
		req.Header.Set("Content-Type", "application/json")
		chatDone <- exchange(t, req)
	}()
	chat := k.chats.next(t)

	drained := make(chan server.DrainResult, 1)
	go func() { drained <- k.srv.Drain(context.Background()) }()
	k.log.WaitFor("drain started: /readyz answers 503, new sessions and turns go elsewhere; running turns finish", 1)

	sentElsewhere(t, idle)
	if status, body := k.probe(t, "/readyz"); status != http.StatusServiceUnavailable || body["status"] != "draining" {
		t.Errorf("/readyz while draining = %d %v, want 503 draining", status, body)
	}
	if status, body := k.probe(t, "/healthz"); status != http.StatusOK || body["status"] != "ok" || body["draining"] != true {
		t.Errorf("/healthz while draining = %d %v, want 200 ok, draining", status, body)
	}

	// A new client's upgrade is accepted, then closed: no session opens.
	sentElsewhere(t, dialURL(t, websocket.DefaultDialer, "ws://"+k.addr+"/client-ws?client_uid=late", nil))
	sentElsewhere(t, dialURL(t, websocket.DefaultDialer, "ws://"+k.addr+"/client-ws?watch_conf=mao", nil))
	select {
	case s := <-k.sessions.opened:
		t.Fatalf("a session opened while draining: %s", s.uid)
	default:
	}

	// A chat request is answered from its headers: its body never comes.
	status, header, body := rawChatRequest(t, k.addr)
	if status != http.StatusServiceUnavailable || header.Get("Retry-After") != "1" ||
		!strings.Contains(body, `"draining":true`) || !strings.Contains(body, "restarting") {
		t.Errorf("chat request while draining = %d Retry-After %q %s; want 503, Retry-After 1, draining", status, header.Get("Retry-After"), body)
	}

	// A new input is refused before its turn starts, and no error frame
	// comes before the close: the client sends it again elsewhere.
	other.send(map[string]any{"type": "text-input", "text": "second"})
	sentElsewhere(t, other)
	if got := otherSession.refusedInputs(); strings.Join(got, "|") != "second" {
		t.Errorf("inputs the session refused = %q, want the one sent while draining", got)
	}

	// The running turns end on their own: each client gets all of its
	// turn, then 1012.
	busySession.endTurn()
	sentElsewhere(t, busy, "reply to a long question")
	chat.end()
	if a := <-chatDone; a.status != http.StatusOK || !strings.Contains(string(a.body), "reply to slow") || !strings.Contains(string(a.body), `"type":"end"`) {
		t.Errorf("the chat running when the drain began = %d %s, want its whole reply", a.status, a.body)
	}

	res := <-drained
	if res.Running != 3 || res.Finished != 3 || res.Cut != 0 {
		t.Errorf("drain = %+v, want 3 running turns, 3 finished, 0 cut", res)
	}
	if d, f, c := k.metrics.counts(); d != 1 || f != 3 || c != 0 {
		t.Errorf("metrics: draining %d, finished %d, cut %d; want 1, 3, 0", d, f, c)
	}
	k.log.WaitFor("drain finished", 1)
}

// A drain that runs out of time (server.drain_timeout, or a second signal)
// leaves the turn still running to Shutdown, which stops it (the session
// is closed: it stores what was heard) and sends its client elsewhere with
// 1012, not 1001.
func TestDrainCutShortStopsTheTurnAt1012(t *testing.T) {
	k := startDrainKoe(t)
	busy, busySession := k.dial(t, "busy")
	startTurn(t, busy, "a long question")

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the second signal came at once
	res := k.srv.Drain(ctx)
	if res.Running != 1 || res.Finished != 0 || res.Cut != 1 {
		t.Errorf("drain = %+v, want 1 running turn, cut", res)
	}
	k.stop(t)
	sentElsewhere(t, busy)
	select {
	case <-busySession.closed:
	default:
		t.Error("the session of the cut turn was not closed (its turn not stopped)")
	}
	if d, f, c := k.metrics.counts(); d != 1 || f != 0 || c != 1 {
		t.Errorf("metrics: draining %d, finished %d, cut %d; want 1, 0, 1", d, f, c)
	}
}

// server.drain_timeout is checked.
func TestDrainTimeoutValidated(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 2 * time.Hour} {
		cfg := server.DefaultConfig()
		cfg.DrainTimeout = d
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "server.drain_timeout") {
			t.Errorf("drain_timeout %s: %v, want an error naming the key", d, err)
		}
	}
	cfg := server.DefaultConfig()
	cfg.DrainTimeout = 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("drain_timeout 0 (no drain): %v", err)
	}
}

// rawChatRequest sends the headers of a chat request that announce a body
// and never sends it, and returns the answer.
func rawChatRequest(t *testing.T, addr string) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "POST /api/chat/invoke HTTP/1.1\r\nHost: "+addr+
		"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

// heldSessions open heldSessions.
type heldSessions struct{ opened chan *heldSession }

func (f *heldSessions) Open(ctx context.Context, out server.Sender, opts server.SessionOptions) (server.Session, error) {
	s := &heldSession{ctx: ctx, out: out, uid: opts.ClientUID, closed: make(chan struct{})}
	f.opened <- s
	return s, nil
}

func (f *heldSessions) Find(string) server.SessionState { return nil }
func (f *heldSessions) List() []protocol.SessionInfo    { return []protocol.SessionInfo{} }

func (f *heldSessions) next(t *testing.T) *heldSession {
	t.Helper()
	select {
	case s := <-f.opened:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no session was opened")
		return nil
	}
}

// heldSession runs a turn per text-input that lasts until endTurn or
// Close, and drains as conversation's sessions do: new inputs are refused,
// idle is called when the running turn has ended.
type heldSession struct {
	ctx    context.Context
	out    server.Sender
	uid    string
	closed chan struct{}
	close  sync.Once

	mu       sync.Mutex
	release  chan struct{} // while a turn runs: closing it ends the turn
	ended    chan struct{} // closed when the running turn has ended
	draining bool
	idle     func()
	refused  []string
}

func (s *heldSession) Greet() { _ = s.out.Send(s.ctx, protocol.FullText("hello")) }

func (s *heldSession) Dispatch(in protocol.Inbound) error {
	if in.Type != protocol.TypeTextInput {
		return nil
	}
	s.mu.Lock()
	if s.draining {
		s.refused = append(s.refused, in.Text)
		s.mu.Unlock()
		return koe.ErrRestarting
	}
	release, ended := make(chan struct{}), make(chan struct{})
	s.release, s.ended = release, ended
	s.mu.Unlock()
	_ = s.out.Send(s.ctx, protocol.FullText("thinking about "+in.Text))
	go func() {
		defer close(ended)
		select {
		case <-release:
			_ = s.out.SendWait(s.ctx, protocol.FullText("reply to "+in.Text))
		case <-s.closed:
		}
		s.mu.Lock()
		idle := s.idle
		s.release, s.idle = nil, nil
		s.mu.Unlock()
		if idle != nil {
			idle()
		}
	}()
	return nil
}

func (s *heldSession) FeedPCM([]byte) error { return nil }

// Close stops the running turn and waits for its end, as a session does.
func (s *heldSession) Close() {
	s.close.Do(func() { close(s.closed) })
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended != nil {
		<-ended
	}
}

func (s *heldSession) Drain(idle func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	if s.release == nil {
		return false
	}
	s.idle = idle
	return true
}

// endTurn lets the running turn say its reply and end.
func (s *heldSession) endTurn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
}

func (s *heldSession) refusedInputs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refused...)
}

// heldChats run chats that reply once the test ends them.
type heldChats struct{ started chan *heldChat }

func (f *heldChats) OpenChat(ctx context.Context, req protocol.ChatRequest, out server.Sender) (server.Chat, error) {
	return &heldChat{ctx: ctx, out: out, req: req, release: make(chan struct{}), started: f.started}, nil
}

func (f *heldChats) StopHistory(context.Context, string) (bool, error) { return false, nil }

func (f *heldChats) next(t *testing.T) *heldChat {
	t.Helper()
	select {
	case c := <-f.started:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no chat turn started")
		return nil
	}
}

type heldChat struct {
	ctx     context.Context
	out     server.Sender
	req     protocol.ChatRequest
	release chan struct{}
	started chan *heldChat
}

func (c *heldChat) Run() error {
	c.started <- c
	select {
	case <-c.release:
	case <-c.ctx.Done():
		return nil
	}
	_ = c.out.SendWait(c.ctx, protocol.MessageEvent{Type: protocol.TypeMessage, Content: protocol.ChatMessage{Type: protocol.MessageAI, Content: "reply to " + c.req.Message}})
	return nil
}

func (c *heldChat) Close() {}

func (c *heldChat) end() { close(c.release) }

// drainCounts is the server's Metrics, keeping the drain's counts.
type drainCounts struct {
	mu                       sync.Mutex
	draining, finished, cuts int
}

func (m *drainCounts) SessionOpened(string) func() { return func() {} }
func (m *drainCounts) QueueDropped(string)         {}
func (m *drainCounts) Draining()                   { m.mu.Lock(); m.draining++; m.mu.Unlock() }
func (m *drainCounts) DrainTurnFinished()          { m.mu.Lock(); m.finished++; m.mu.Unlock() }
func (m *drainCounts) DrainEnded(cut int, _ time.Duration) {
	m.mu.Lock()
	m.cuts += cut
	m.mu.Unlock()
}

func (m *drainCounts) counts() (draining, finished, cut int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.draining, m.finished, m.cuts
}
