package conversation

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sort"
	"sync"

	"koe"
	"koe/agent"
	"koe/protocol"
	"koe/tts"
)

// HistoryStore is the persistence conversations need.
type HistoryStore interface {
	Create(ctx context.Context, confUID string) (string, error)
	CreateWith(ctx context.Context, confUID, historyUID string, records ...koe.Record) error
	Append(ctx context.Context, confUID, historyUID string, r koe.Record) error
	Messages(ctx context.Context, confUID, historyUID string) ([]koe.Record, error)
	Delete(ctx context.Context, confUID, historyUID string) error
	AddSummary(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error
	Summaries(ctx context.Context, confUID, historyUID string) ([]koe.SummaryRecord, error)
	// Prompt reads a prompt the user saved for the character.
	Prompt(ctx context.Context, confUID, name string) (text string, saved bool, err error)
	// LastSeq is the sequence number of the history's newest record.
	LastSeq(ctx context.Context, confUID, historyUID string) (uint64, error)
}

// Histories are what a client asks of the stored histories and prompts,
// over the WebSocket as over REST, so that both show the same.
type Histories interface {
	// List lists a character's non-empty histories, newest first.
	List(ctx context.Context, confUID string) (protocol.HistoryList, error)
	HistoryPage(ctx context.Context, confUID, historyUID string, before uint64, limit int) (protocol.HistoryPage, error)
	Prompt(ctx context.Context, confUID, name string) (protocol.Prompt, error)
	// SetPrompt saves a prompt; the hub's PromptsChanged is told.
	SetPrompt(ctx context.Context, confUID, name, text string) (protocol.Prompt, error)
}

// Errors a CharacterSource wraps when a client asks for a character it
// cannot have; their text is for the client. Any other error is koe's own.
var (
	// ErrNoCharacter: there is no character file of that name.
	ErrNoCharacter = errors.New("no such character")
	// ErrBrokenCharacter: the file is there but does not load (its error
	// names the file, the key and the line).
	ErrBrokenCharacter = errors.New("character file does not load")
)

// CharacterSource lists and loads the selectable characters.
type CharacterSource interface {
	Default() Character
	List() ([]protocol.ConfigFile, error)
	Load(file string) (Character, error)
	// Has reports whether a configured character has this conf_uid.
	Has(confUID string) bool
	// Find returns the character with this conf_uid, if there is one.
	Find(confUID string) (Character, bool)
}

// Sender delivers messages to one client, in the order they were sent.
type Sender interface {
	// Send queues msg. If ctx ends before the writer reaches msg, msg is
	// dropped unsent: that is how a cancelled turn goes silent at once.
	Send(ctx context.Context, msg any) error
	// SendWait queues msg and returns once it has been written.
	SendWait(ctx context.Context, msg any) error
}

// Deps are what every session of a server shares. app builds them once.
type Deps struct {
	Config Config
	Store  HistoryStore
	// Histories are the characters' histories and prompts as clients
	// read them (package histories' Service).
	Histories  Histories
	Characters CharacterSource
	// NewLLM builds the LLM client for a character's settings.
	NewLLM func(agent.Config) agent.LLM
	// NewTTS builds the speech engine for a character's settings.
	NewTTS func(tts.Config) (Synthesizer, error)
	// ASR transcribes recordings (nil: speech input is off, ASRErr says why).
	ASR    Transcriber
	ASRErr error
	// Backgrounds lists the background images clients may choose from
	// (fetch-backgrounds); nil means none.
	Backgrounds func() []string
	// ToolServers gives the tools of the MCP servers a character enables
	// (nil: none are configured).
	ToolServers ToolServers
	// Recall is the characters' long-term memory (nil: none).
	Recall Recall
	// Coordinator makes a history have one running turn, across the
	// instances that share it (nil: a LocalCoordinator, this process).
	Coordinator Coordinator
	// WatchRelay carries frames to the watchers of other instances (nil:
	// watchers follow the sessions of this instance only).
	WatchRelay WatchRelay
	// Knowledge is the characters' documents (nil: none), and
	// KnowledgeRouter knowledge.router: when turns read them.
	Knowledge       Knowledge
	KnowledgeRouter string
	Logger          *slog.Logger
	// Observer counts turns, latencies and failures for the operator
	// (nil: nothing is counted).
	Observer Observer
}

// ToolServers are the tool servers koe is connected to, shared by every
// session (package mcp's Manager).
type ToolServers interface {
	// Toolbox returns the tools of the named servers, as they are at each
	// call.
	Toolbox(servers []string) agent.Toolbox
}

// Hub is the conversation side of a server: it opens sessions (a
// client's, a chat API turn's, a character's live one), knows the open
// ones, gives each history one running turn, and holds the sessions'
// watchers. What needs no session (stored histories, prompts, documents,
// memories) is served by the packages that keep it. Its methods are safe
// for concurrent use.
type Hub struct {
	deps Deps
	log  *slog.Logger
	// speech and asr bound CPU-heavy work across every session.
	speech, asr *workSlots

	// coord gives each history one running turn; running is this
	// process's turn in each history.
	coord   Coordinator
	running historyTurns

	// retiring tracks agents being closed in the background (their
	// summaries may still be storing); Close waits for them.
	retiring sync.WaitGroup

	// watch follows sessions' output for their watchers (watch.go).
	watch *Watchers
	// characters counts the turns of each character outside its live
	// session (live.go).
	characters characterTurns

	// groups are the groups of clients (group.go).
	groups groupSet

	mu       sync.Mutex
	sessions map[string]*Session // by client_uid
	lives    map[string]*Live    // by conf_uid
	closed   bool
}

// NewHub builds the hub. Work bounds are sized from GOMAXPROCS: the cores
// koe may use, which is what local speech engines compete for.
func NewHub(deps Deps) *Hub {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Observer == nil {
		deps.Observer = noObserver{}
	}
	if deps.Backgrounds == nil {
		deps.Backgrounds = func() []string { return []string{} }
	}
	procs := runtime.GOMAXPROCS(0)
	speech := deps.Config.SpeechSlots
	if speech == 0 {
		speech = 2 * procs
	}
	coord := deps.Coordinator
	if coord == nil {
		coord = NewLocalCoordinator()
	}
	h := &Hub{
		deps:     deps,
		coord:    coord,
		log:      deps.Logger,
		speech:   newWorkSlots(speech),
		asr:      newWorkSlots(procs),
		sessions: map[string]*Session{},
	}
	h.watch = &Watchers{chars: deps.Characters, session: h.Session, relay: deps.WatchRelay, log: deps.Logger, airBytes: deps.Config.OnAirBytes}
	return h
}

// Watchers are the watchers of this hub's sessions.
func (h *Hub) Watchers() *Watchers { return h.watch }

// SessionOptions describe one client connection.
type SessionOptions struct {
	// ClientUID identifies the connection (unique per connection).
	ClientUID string
	// KoeEvents: the client asked for koe's own events (token deltas,
	// memory-state after every turn) besides the OLV message set.
	KoeEvents bool
	// TextOnly: the client reads replies as text (the chat API): no
	// speech is made and no playback is waited for.
	TextOnly bool
	// Replaced is called when a new connection opens a session with the
	// same ClientUID (the client reconnected before this one was seen
	// gone): this one's connection is to be closed.
	Replaced func()
	// Headless: nobody plays the audio but watchers (a live session); a
	// turn waits for its audio's duration, not for playback-complete.
	Headless bool
	// Rules end the system prompt of every request the session makes,
	// whatever prompt the user saved (see agent.Options.Rules).
	Rules string
	// PlaysItself: the client plays the audio on its own clock and tells
	// koe nothing of it (a Realtime API client): a turn ends once its
	// audio has had the time to play from its first piece on, without
	// waiting for a word from the client, which may cut it short until
	// then (Session.BargeIn, Session.Truncate).
	PlaysItself bool
	Logger      *slog.Logger
}

// Open starts a session for one client with the default character. ctx
// bounds its life; Close ends it. It returns nil once the hub is closing,
// or when the client_uid cannot be the client's (see OpenClient).
func (h *Hub) Open(ctx context.Context, out Sender, opts SessionOptions) *Session {
	s, _ := h.OpenClient(ctx, out, opts)
	return s
}

// OpenClient is Open saying why a client cannot have its session: its
// client_uid is held by a session without a client of its own (see
// claimLocked). It returns nil, nil once the hub is closing.
func (h *Hub) OpenClient(ctx context.Context, out Sender, opts SessionOptions) (*Session, error) {
	return h.openClient(ctx, out, opts, h.deps.Characters.Default())
}

// open starts a session for one client with char (nil: refused, or the
// hub is closing).
func (h *Hub) open(ctx context.Context, out Sender, opts SessionOptions, char Character) *Session {
	s, _ := h.openClient(ctx, out, opts, char)
	return s
}

func (h *Hub) openClient(ctx context.Context, out Sender, opts SessionOptions, char Character) (*Session, error) {
	s := newSession(ctx, h, out, opts, char)
	if err := h.register(s); errors.Is(err, errHubClosed) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	h.watch.greet(s, s.Character())
	return s, nil
}

// errHubClosed: the hub is closing and opens no session.
var errHubClosed = koe.Errorf(koe.Unavailable, "koe is shutting down")

// register lists the new session s under its client_uid (see
// claimLocked) and gives it the prompts saved meanwhile; on an error
// (errHubClosed once the hub is closing) s is let go.
func (h *Hub) register(s *Session) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		s.cast.agent.Close()
		return errHubClosed
	}
	replaced, err := h.claimLocked(s)
	h.mu.Unlock()
	if err != nil {
		s.cast.agent.Close()
		return err
	}
	if replaced != nil {
		replaced()
	}
	// A prompt saved while the session was being built reached every open
	// session but this one.
	h.applyPrompts(s.cast)
	return nil
}

// claimLocked registers s under its client_uid, with h.mu held. A client
// reconnecting takes its client_uid back from its old connection, which
// is closed (replaced, to call once h.mu is released). A session without
// a client of its own (a scene's or the live session, headless; a
// Realtime connection's, which its client reaches by its connection, not
// by client_uid) has no connection to close: nobody may take its
// client_uid, or its invites, sessions API, and watchers by client_uid
// would reach the newcomer while it goes on unseen.
func (h *Hub) claimLocked(s *Session) (replaced func(), err error) {
	uid := s.clientUID
	if prev := h.sessions[uid]; prev != nil {
		if prev.headless || prev.playsItself {
			return nil, koe.Errorf(koe.Conflict, "client_uid %s is held by a session without a client (a scene's, the live session or a Realtime connection): connect with another client_uid, or watch it with ?watch=%s", uid, uid)
		}
		replaced = prev.replaced
	}
	h.sessions[uid] = s
	return replaced, nil
}

// Session returns the open session of a client, or nil.
func (h *Hub) Session(clientUID string) *Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[clientUID]
}

// Sessions describes the open sessions, ordered by client_uid.
func (h *Hub) Sessions() []protocol.SessionInfo {
	out := []protocol.SessionInfo{}
	for _, s := range h.openSessions() {
		out = append(out, s.Info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientUID < out[j].ClientUID })
	return out
}

// openSessions is a snapshot: callers work on it without the hub's lock.
func (h *Hub) openSessions() []*Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*Session, 0, len(h.sessions))
	for _, s := range h.sessions {
		out = append(out, s)
	}
	return out
}

func (h *Hub) forget(s *Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[s.clientUID] == s {
		delete(h.sessions, s.clientUID)
	}
}

// retire closes an agent in the background: closing waits for a summary
// that may be storing, and nobody should wait for that (a character
// switch, a disconnect). Close waits for every retiring agent.
func (h *Hub) retire(a *agent.Agent) {
	// Add only while Close has not begun waiting, as WaitGroup requires.
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.retiring.Add(1)
	}
	h.mu.Unlock()
	if closed {
		a.Close()
		return
	}
	go func() {
		defer h.retiring.Done()
		a.Close()
	}()
}

// Close refuses new sessions and waits for the background work of closed
// ones (summaries being stored). Call it after every session has closed
// and before the store closes.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.retiring.Wait()
}
