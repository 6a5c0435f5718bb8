package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe"
	"koe/knowledge"
	"koe/livechat"
	"koe/protocol"
	"koe/recall"
	"koe/server"
)

// The server on its own: server.New built on fakes of the interfaces it
// consumes, with no app, no LLM and no store behind them. These tests pin
// what the server itself decides: routes, statuses, JSON shapes, the
// WebSocket's connect sequence and framing. What a conversation says is
// the end-to-end tests' business.

// fakeKoe is a served server and the fakes behind it.
type fakeKoe struct {
	addr      string
	sessions  *fakeSessions
	chats     *fakeChats
	histories *fakeHistories
	prompts   *fakePrompts
	documents *fakeDocuments
	memories  *fakeMemories
	watchers  *fakeWatchers
	overlays  *fakeOverlays
	live      *fakeLive
	logs      *syncBuffer
}

// startFake serves a server built on fresh fakes; edit may change its
// options (drop a service, say) before it is built.
func startFake(t *testing.T, edit ...func(*server.Options)) *fakeKoe {
	t.Helper()
	k := &fakeKoe{
		sessions:  &fakeSessions{opened: make(chan *fakeSession, 16), open: map[string]*fakeSession{}},
		chats:     &fakeChats{},
		histories: &fakeHistories{},
		prompts:   &fakePrompts{saved: map[string]string{}},
		documents: &fakeDocuments{},
		memories:  &fakeMemories{},
		watchers:  &fakeWatchers{attached: make(chan server.Watcher, 4), detached: make(chan struct{}, 4)},
		overlays:  &fakeOverlays{},
		live:      &fakeLive{},
		logs:      &syncBuffer{},
	}
	opts := server.Options{
		Config:      server.DefaultConfig(),
		Sessions:    k.sessions,
		Chats:       k.chats,
		Histories:   k.histories,
		Prompts:     k.prompts,
		Documents:   k.documents,
		Attachments: k.documents,
		Memories:    k.memories,
		Watchers:    k.watchers,
		Overlays:    k.overlays,
		LiveChat:    k.live,
		Logger:      slog.New(slog.NewTextHandler(k.logs, nil)),
	}
	for _, e := range edit {
		e(&opts)
	}
	srv := server.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-served
	})
	k.addr = ln.Addr().String()
	return k
}

// Failures as the fakes return them, one of each kind a client is told
// about; errInternal is koe's own, which the client only hears of.
var (
	errNotFound    = koe.Errorf(koe.NotFound, "no such thing here")
	errInvalid     = koe.Errorf(koe.Invalid, "that is not right")
	errUnavailable = koe.Errorf(koe.Unavailable, "the LLM server at http://llm.test/v1 failed")
	errConflict    = koe.Errorf(koe.Conflict, "busy: try again when the reply is done")
	errInternal    = errors.New("disk on fire at /var/lib/koe")
)

// reply is one HTTP exchange's outcome.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the reply's body into v.
func (a reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("answer %d %q is not JSON: %v", a.status, a.body, err)
	}
}

// errorText is the "error" of a failure's JSON body.
func (a reply) errorText(t *testing.T) string {
	t.Helper()
	var e struct{ Error string }
	a.json(t, &e)
	return e.Error
}

// do sends one request; a body is sent as JSON unless contentType says
// otherwise.
func (k *fakeKoe) do(t *testing.T, method, path string, body any, contentType ...string) reply {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+k.addr+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if len(contentType) > 0 {
		req.Header.Set("Content-Type", contentType[0])
	}
	return exchange(t, req)
}

// exchange sends req and reads the whole answer.
func exchange(t *testing.T, req *http.Request) reply {
	t.Helper()
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// locked reads (or changes) a fake's state under its lock: the server's
// goroutines write it, and an HTTP answer orders nothing for the race
// detector.
func locked[T any](mu *sync.Mutex, f func() T) T {
	mu.Lock()
	defer mu.Unlock()
	return f()
}

// fakeSessions opens fakeSessions and tells the test of each.
type fakeSessions struct {
	opened chan *fakeSession
	// closing: Open answers as a hub that is shutting down.
	closing bool

	mu   sync.Mutex
	open map[string]*fakeSession
}

func (f *fakeSessions) Open(ctx context.Context, out server.Sender, opts server.SessionOptions) (server.Session, error) {
	f.mu.Lock()
	closing := f.closing
	f.mu.Unlock()
	if closing {
		return nil, nil
	}
	s := &fakeSession{ctx: ctx, out: out, opts: opts, inbound: make(chan protocol.Inbound, 16), pcm: make(chan []byte, 16),
		closed: make(chan struct{}), notified: make(chan any, 16)}
	f.mu.Lock()
	f.open[opts.ClientUID] = s
	f.mu.Unlock()
	f.opened <- s
	return s, nil
}

func (f *fakeSessions) Find(clientUID string) server.SessionState {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.open[clientUID]; ok {
		return s
	}
	return nil
}

func (f *fakeSessions) List() []protocol.SessionInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []protocol.SessionInfo{}
	for uid := range f.open {
		out = append(out, protocol.SessionInfo{ClientUID: uid, ConfUID: "mao", ConfName: "Mao", HistoryUID: "h-" + uid})
	}
	slices.SortFunc(out, func(a, b protocol.SessionInfo) int { return strings.Compare(a.ClientUID, b.ClientUID) })
	return out
}

// next is the session the server opens next.
func (f *fakeSessions) next(t *testing.T) *fakeSession {
	t.Helper()
	select {
	case s := <-f.opened:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no session was opened")
		return nil
	}
}

// fakeSession greets with two frames, echoes text input, fails as asked
// (a text-input of "fail: KIND") and records the rest.
type fakeSession struct {
	ctx      context.Context
	out      server.Sender
	opts     server.SessionOptions
	inbound  chan protocol.Inbound
	pcm      chan []byte
	closed   chan struct{}
	close    sync.Once
	notified chan any
	rate     float64
}

func (s *fakeSession) Greet() {
	_ = s.out.Send(s.ctx, protocol.FullText(protocol.ConnectionEstablished))
	_ = s.out.Send(s.ctx, protocol.SetModelAndConf{Type: protocol.TypeSetModelAndConf, ConfUID: "mao", ClientUID: s.opts.ClientUID})
}

func (s *fakeSession) Dispatch(in protocol.Inbound) error {
	s.inbound <- in
	switch in.Type {
	case protocol.TypeHeartbeat:
		return s.out.Send(s.ctx, protocol.Simple{Type: protocol.TypeHeartbeatAck})
	case protocol.TypeTextInput:
	default:
		return nil
	}
	switch in.Text {
	case "fail: invalid":
		return errInvalid
	case "fail: internal":
		return errInternal
	}
	return s.out.SendWait(s.ctx, protocol.Text{Type: protocol.TypeFullText, Text: "you said " + in.Text})
}

func (s *fakeSession) FeedPCM(data []byte) error {
	s.pcm <- data
	if len(data)%2 != 0 {
		return errInvalid
	}
	return nil
}

func (s *fakeSession) Close() { s.close.Do(func() { close(s.closed) }) }

// Drain: a fakeSession's turns end within Dispatch, so none is ever
// running (drain_test.go's heldSession has turns that last).
func (s *fakeSession) Drain(func()) bool { return false }

func (s *fakeSession) MemoryState() protocol.MemoryState {
	return protocol.MemoryState{Type: protocol.TypeMemoryState, HistoryUID: "h-" + s.opts.ClientUID, CompressionRate: s.rate}
}

func (s *fakeSession) SetCompressionRate(rate float64) (protocol.MemoryState, error) {
	if rate > 0.5 {
		return protocol.MemoryState{}, errInvalid
	}
	s.rate = rate
	return s.MemoryState(), nil
}

func (s *fakeSession) Notify(msg any) { s.notified <- msg }

func (s *fakeSession) LastContext() (protocol.Context, error) {
	return protocol.Context{}, errNotFound
}

// fakeChats runs chats that say what reply says, in the events a turn
// sends; a message of "fail" is refused before the turn.
type fakeChats struct {
	mu      sync.Mutex
	asked   []protocol.ChatRequest
	stopped []string
}

func (f *fakeChats) OpenChat(ctx context.Context, req protocol.ChatRequest, out server.Sender) (server.Chat, error) {
	f.mu.Lock()
	f.asked = append(f.asked, req)
	f.mu.Unlock()
	switch req.Message {
	case "fail":
		return nil, errNotFound
	case "boom":
		return nil, errInternal
	}
	return &fakeChat{ctx: ctx, out: out, req: req}, nil
}

func (f *fakeChats) StopHistory(_ context.Context, uid string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, uid)
	return uid == "running", nil
}

type fakeChat struct {
	ctx context.Context
	out server.Sender
	req protocol.ChatRequest
}

// Run sends what a turn of a text-only session sends: the human message,
// tokens, the answer, the OLV frames the stream has no event for, and the
// end of the chain, waited for.
func (c *fakeChat) Run() error {
	uid := c.req.HistoryUID
	if uid == "" {
		uid = "new-history"
	}
	kw := protocol.AdditionalKwargs{HistoryUID: uid}
	for _, msg := range []any{
		protocol.MessageEvent{Type: protocol.TypeMessage, Content: protocol.ChatMessage{Type: protocol.MessageHuman, Content: c.req.Message, AdditionalKwargs: kw}},
		protocol.Token{Type: protocol.TypeToken, Content: "echo "},
		protocol.Token{Type: protocol.TypeToken, Content: c.req.Message},
		protocol.Control(protocol.ControlChainStart),
		protocol.MessageEvent{Type: protocol.TypeMessage, Content: protocol.ChatMessage{Type: protocol.MessageAI, Content: "echo " + c.req.Message, AdditionalKwargs: kw}},
	} {
		if err := c.out.Send(c.ctx, msg); err != nil {
			return nil
		}
	}
	_ = c.out.SendWait(c.ctx, protocol.Control(protocol.ControlChainEnd))
	return nil
}

func (c *fakeChat) Close() {}

// fakeHistories knows one history, "h1" of "mao", with one message and one
// image; others are not found.
type fakeHistories struct {
	mu    sync.Mutex
	pages [][2]uint64 // before, limit of each page asked for
}

func (f *fakeHistories) Histories(_ context.Context, conf string) (protocol.HistoryList, error) {
	if conf != "mao" {
		return protocol.HistoryList{}, errNotFound
	}
	return protocol.HistoryList{Type: protocol.TypeHistoryList, Histories: []protocol.HistoryEntry{{UID: "h1"}}}, nil
}

func (f *fakeHistories) HistoryPage(_ context.Context, conf, uid string, before uint64, limit int) (protocol.HistoryPage, error) {
	f.mu.Lock()
	f.pages = append(f.pages, [2]uint64{before, uint64(limit)})
	f.mu.Unlock()
	if conf != "mao" || uid != "h1" {
		return protocol.HistoryPage{}, errNotFound
	}
	return protocol.HistoryPage{Type: protocol.TypeHistoryPage, HistoryUID: uid, Messages: []protocol.HistoryRecord{{ID: 1, Role: "human", Content: "hi"}}}, nil
}

func (f *fakeHistories) ChatHistory(_ context.Context, conf, uid string, before uint64, limit int) (protocol.ChatHistory, error) {
	if conf != "mao" || uid != "h1" {
		return protocol.ChatHistory{}, errNotFound
	}
	return protocol.ChatHistory{ConfUID: conf, HistoryUID: uid, Messages: []protocol.ChatMessage{{Type: protocol.MessageHuman, Content: "hi"}}}, nil
}

func (f *fakeHistories) Image(_ context.Context, conf, uid, ref string) (string, []byte, error) {
	if conf != "mao" || uid != "h1" || ref != "img1" {
		return "", nil, errNotFound
	}
	return "image/png", []byte("\x89PNG fake"), nil
}

// fakePrompts keeps prompts in a map; "mao" is the only character.
type fakePrompts struct {
	mu    sync.Mutex
	saved map[string]string
}

func (f *fakePrompts) Prompt(_ context.Context, conf, name string) (protocol.Prompt, error) {
	if conf != "mao" || name != "system" && name != "reminder" {
		return protocol.Prompt{}, errNotFound
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	text, ok := f.saved[name]
	if !ok {
		text = "the default " + name
	}
	return protocol.Prompt{Type: "system-prompt", Text: text, Default: !ok}, nil
}

func (f *fakePrompts) SetPrompt(ctx context.Context, conf, name, text string) (protocol.Prompt, error) {
	if _, err := f.Prompt(ctx, conf, name); err != nil {
		return protocol.Prompt{}, err
	}
	f.mu.Lock()
	if text == "" {
		delete(f.saved, name)
	} else {
		f.saved[name] = text
	}
	f.mu.Unlock()
	return f.Prompt(ctx, conf, name)
}

// fakeDocuments takes text files into "mao"'s knowledge base and refuses
// the rest as the knowledge service does; it attaches to "h1" only.
type fakeDocuments struct {
	mu   sync.Mutex
	docs []knowledge.Document
}

func (f *fakeDocuments) Add(_ context.Context, conf string, u knowledge.Upload) (knowledge.Document, error) {
	if conf != "mao" {
		return knowledge.Document{}, errNotFound
	}
	if !strings.HasSuffix(u.Name, ".txt") {
		return knowledge.Document{}, &knowledge.FileError{Filename: u.Name, Kind: knowledge.ErrKindType, Reason: "only text here"}
	}
	d := knowledge.Document{ID: "d" + u.Name, Name: u.Name, Bytes: len(u.Data), Tokens: len(strings.Fields(string(u.Data)))}
	f.mu.Lock()
	f.docs = append(f.docs, d)
	f.mu.Unlock()
	return d, nil
}

func (f *fakeDocuments) List(_ context.Context, conf string) ([]knowledge.Document, error) {
	if conf != "mao" {
		return nil, errNotFound
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]knowledge.Document{}, f.docs...), nil
}

func (f *fakeDocuments) Delete(_ context.Context, conf, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, d := range f.docs {
		if d.ID == id {
			f.docs = slices.Delete(f.docs, i, i+1)
			return nil
		}
	}
	return errNotFound
}

func (f *fakeDocuments) AttachFile(_ context.Context, conf, uid string, u knowledge.Upload) (protocol.AttachedFile, error) {
	switch uid {
	case "llm-down":
		return protocol.AttachedFile{}, errUnavailable
	case "busy":
		return protocol.AttachedFile{}, errConflict
	}
	if conf != "mao" || uid != "h1" {
		return protocol.AttachedFile{}, errNotFound
	}
	return protocol.AttachedFile{Document: 1, Name: u.Name, Bytes: len(u.Data)}, nil
}

// fakeMemories remembers one memory of "mao" and records what it is asked.
type fakeMemories struct {
	mu     sync.Mutex
	asked  []string
	budget *int
}

func (f *fakeMemories) note(format string) {
	f.mu.Lock()
	f.asked = append(f.asked, format)
	f.mu.Unlock()
}

func (f *fakeMemories) Recall(_ context.Context, conf, text string, budget *int) (recall.Recollection, error) {
	f.note("recall " + conf + " " + text)
	f.mu.Lock()
	f.budget = budget
	f.mu.Unlock()
	if budget != nil && *budget < 50 {
		return recall.Recollection{}, errInvalid
	}
	return recall.Recollection{ConfUID: conf, Query: text, Budget: 1000, Block: "Biscuit"}, nil
}

func (f *fakeMemories) List(_ context.Context, conf, before string, limit int) (recall.Listing, error) {
	f.note("list " + conf + " " + before)
	if limit > 500 {
		return recall.Listing{}, errInvalid
	}
	return recall.Listing{ConfUID: conf}, nil
}

func (f *fakeMemories) Forget(_ context.Context, conf, uid string, seq uint64) error {
	f.note("forget " + conf + " " + uid)
	if seq != 7 {
		return errNotFound
	}
	return nil
}

func (f *fakeMemories) ForgetConversation(_ context.Context, conf, uid string) (int, error) {
	f.note("forget history " + conf + " " + uid)
	return 3, nil
}

func (f *fakeMemories) ForgetEverything(_ context.Context, conf string) (int, error) {
	f.note("forget all " + conf)
	return 9, nil
}

// fakeWatchers lets "mao" and any valid client be watched and hands the
// test each watcher.
type fakeWatchers struct {
	attached chan server.Watcher
	detached chan struct{}
	mu       sync.Mutex
	opts     []server.WatchOptions
}

func (f *fakeWatchers) CheckWatch(t protocol.WatchTarget) error {
	if t.ConfUID != "" && t.ConfUID != "mao" {
		return errNotFound
	}
	return nil
}

func (f *fakeWatchers) Watch(t protocol.WatchTarget, w server.Watcher, opts server.WatchOptions) (func(), error) {
	if err := f.CheckWatch(t); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.opts = append(f.opts, opts)
	f.mu.Unlock()
	f.attached <- w
	return func() { f.detached <- struct{}{} }, nil
}

type fakeOverlays struct{}

func (fakeOverlays) Overlay(conf string) (protocol.OverlayView, error) {
	if conf != "mao" && conf != "default" {
		return protocol.OverlayView{}, errNotFound
	}
	return protocol.OverlayView{ConfUID: "mao", Name: "Mao", EmotionKeywords: []string{"joy"}}, nil
}

// fakeLive is a live chat whose leader cannot be reached once down is set.
type fakeLive struct {
	mu     sync.Mutex
	paused bool
	down   bool
}

func (f *fakeLive) state() (livechat.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return livechat.Status{}, errors.New("the leading instance does not answer")
	}
	return livechat.Status{Paused: f.paused, RunningUsers: []string{}, Dropped: map[string]uint64{}, Sources: []livechat.SourceStatus{}}, nil
}

func (f *fakeLive) Status(context.Context) (livechat.Status, error) { return f.state() }

func (f *fakeLive) Pause(context.Context) (livechat.Status, error) {
	f.mu.Lock()
	f.paused = true
	f.mu.Unlock()
	return f.state()
}

func (f *fakeLive) Resume(context.Context) (livechat.Status, error) {
	f.mu.Lock()
	f.paused = false
	f.mu.Unlock()
	return f.state()
}

func (f *fakeLive) Skip(context.Context) (bool, livechat.Status, error) {
	st, err := f.state()
	return true, st, err
}
