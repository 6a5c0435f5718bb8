// Package conversation runs each client's conversation: the turn state
// machine, interrupts, history switching, voice input and what is sent
// when. It talks to the client only through a Sender and to the LLM only
// through the agent.
//
// A Session is split by job, each part with its own state and rules:
//   - turns (turns.go, turn.go): at most one turn runs; a new input, an
//     interrupt or a switch stops it, and it stores what it had;
//   - the cast and the place (this file, histories.go): the character with
//     its agent and speech engine, and the history being talked in,
//     swapped under a lock that is never held across a call out;
//   - voice (voice.go): the microphone input, owned by the connection's
//     read loop, so it needs no lock at all;
//   - its watchers (watch.go, relay.go): what it says, offered to the
//     watchers that follow it, here and on other instances.
package conversation

import (
	"context"
	"errors"
	"fmt"
	"koe"
	"koe/tools"
	"log/slog"
	"sync"
	"sync/atomic"

	"koe/agent"
	"koe/protocol"
)

// Why a turn was stopped; the turn reads it to decide what to persist.
var (
	errSuperseded       = errors.New("superseded by a new input")
	errHistoryChanged   = errors.New("history changed")
	errCharacterChanged = errors.New("character changed")
	errSessionClosed    = errors.New("session closed")
)

// interruptCause carries what the user heard before interrupting.
type interruptCause struct{ heard string }

func (interruptCause) Error() string { return "interrupted by the user" }

// Session is one client's conversation. Dispatch, Greet, FeedPCM and Close
// are called from the connection's read loop; the query methods (Info,
// MemoryState, LastContext, …) from anywhere.
type Session struct {
	hub       *Hub
	deps      *Deps // the hub's, shared: a copy per session cost each idle session 352 bytes
	out       Sender
	air       onAir // the reply on air, for watchers that join (air.go)
	log       *slog.Logger
	ctx       context.Context
	clientUID string
	koeEvents bool
	textOnly  bool
	replaced  func() // SessionOptions.Replaced
	headless  bool
	rules     string // SessionOptions.Rules
	// playsItself: SessionOptions.PlaysItself.
	playsItself bool

	turns turns
	voice voice // the read loop's own
	// asks is the question a turn waits on the user's answer to (ask.go).
	asks asking
	// hearing is set while a spoken answer is being transcribed: one at a
	// time, so recordings sent meanwhile cannot pile up on the ASR slots.
	hearing atomic.Bool
	// groupHearing counts the recordings for the session's group being
	// transcribed (each in a goroutine of its own); Close waits for them.
	groupHearing sync.WaitGroup
	// turnAttrs label the log lines of the running turn (observe.go).
	turnAttrs atomic.Pointer[[]slog.Attr]
	// audience, while a round's turn of this session runs, is who else
	// gets its frames (group_round.go).
	audience atomic.Pointer[audience]
	// listening, while a round's turn of another session runs, is its
	// audience, which this session's client is part of.
	listening atomic.Pointer[audience]
	// group is the client's group, if it is in one (group.go); leaving:
	// the session is closing, and no group may take it.
	group   atomic.Pointer[Group]
	leaving atomic.Bool
	// client is the tools the client runs itself, and its results
	// waiting for the next turn (clienttools.go).
	client clientSide

	mu    sync.Mutex // guards cast and place; never held across a call out
	cast  cast
	place place
}

// cast is what a session builds for its character; a switch replaces it
// whole, so a turn that took a copy keeps a consistent one.
type cast struct {
	char     Character
	agent    *agent.Agent
	tts      Synthesizer // nil when the engine could not be built
	ttsErr   error       // why; told to the client once, at the next turn
	emotions []string
	// emotion maps the emotion keywords to the model's expressions; it
	// is shared with other sessions (see modelInfoOf): read only.
	emotion map[string]any
}

// place is the history the session talks in.
type place struct {
	uid  string // "" until the first turn or create-new-history
	used bool   // it holds more than its metadata record
	// seen is the newest record of the history that memory holds: when
	// the stored history has moved past it (another session talked in
	// it), memory is read again before the next turn.
	seen uint64
}

func newSession(ctx context.Context, h *Hub, out Sender, opts SessionOptions, char Character) *Session {
	log := opts.Logger
	if log == nil {
		log = h.log
	}
	s := &Session{
		hub:       h,
		deps:      &h.deps,
		out:       out,
		ctx:       ctx,
		clientUID: opts.ClientUID,
		koeEvents: opts.KoeEvents,
		textOnly:  opts.TextOnly,
		replaced:  opts.Replaced,
		headless:  opts.Headless,
		rules:     opts.Rules,

		playsItself: opts.PlaysItself,
	}
	s.log = slog.New(turnLogs{Handler: log.Handler(), cur: &s.turnAttrs})
	s.air.init(s.clientUID, func() string { return s.Character().ConfUID }, false)
	s.voice = voice{s: s, rate: defaultRawRate}
	s.cast = s.buildCast(char)
	return s
}

// buildCast makes the agent and the speech engine of a character. It may
// do I/O, so it runs before the session's lock is taken.
func (s *Session) buildCast(char Character) cast {
	mi := modelInfoOf(char.ModelInfo)
	c := cast{char: char, emotions: mi.keywords, emotion: mi.emotion}
	box := s.deps.toolbox(char, s.log)
	var a *agent.Agent
	a = agent.New(agent.Options{
		LLM:           s.deps.NewLLM(char.LLM),
		Model:         char.LLM.Model,
		ContextWindow: char.LLM.ContextWindow,
		Vision:        char.LLM.Vision,
		Memory:        char.Memory,
		// The saved prompts are applied once the cast is in place (see
		// Hub.applyPrompts).
		Persona:       s.deps.persona(s.ctx, char, s.log),
		Rules:         s.rules,
		CharacterName: char.Name,
		HumanName:     char.HumanName,
		Store:         notingSummaries{store: s.deps.Store, deps: s.deps},
		Recall:        s.deps.recaller(char),
		RecallBudget:  char.Memory.RecallBudget,
		Knowledge:     s.deps.knowledgeOf(char),
		Router:        s.deps.KnowledgeRouter,
		OnSummary:     func(st agent.MemoryState) { s.summaryReady(a, st) },
		Tools:         box,
		MaxCycles:     char.LLM.Cycles(),
		ToolTimeout:   char.Tools.Timeout,
		AskTimeout:    char.Tools.AskTimeout,
		MaxQuestions:  char.Tools.MaxQuestions,
		MaxTools:      char.LLM.ToolLimit(),
		Logger:        s.log,
	})
	c.agent = a
	if s.deps.NewTTS != nil && !s.textOnly {
		c.tts, c.ttsErr = s.deps.NewTTS(char.TTS)
		if c.ttsErr != nil {
			s.log.Error("speech engine unavailable; replies will be text only", "conf_uid", char.ConfUID, "err", c.ttsErr)
		}
	}
	return c
}

// toolbox is the tools a character may use: its built-in ones, the
// document search when the knowledge router is off, and those of the MCP
// servers it enables. koe's own come first: over llm.max_tools, the last
// are left out.
func (d *Deps) toolbox(char Character, log *slog.Logger) agent.Toolbox {
	if log == nil {
		log = d.Logger
	}
	var builtin, servers agent.Toolbox
	// Validated when the character was loaded; a failure here is a
	// character that skipped validation, and it talks without them.
	if b, err := char.Tools.Box(tools.Options{}); err != nil {
		log.Error("tools unavailable; the character talks without them", "conf_uid", char.ConfUID, "err", err)
	} else if b != nil {
		builtin = b
	}
	if len(char.Tools.MCPServers) > 0 && d.ToolServers != nil {
		servers = d.ToolServers.Toolbox(char.Tools.MCPServers)
	}
	return agent.Guard(agent.JoinToolboxes(builtin, d.documentSearch(char), servers), char.Tools.Policy())
}

// summaryReady tells a koe client about a new summary of its current
// agent. It gets the state as a value and calls nothing back: the agent
// may be closing.
func (s *Session) summaryReady(from *agent.Agent, st agent.MemoryState) {
	s.mu.Lock()
	current := s.cast.agent == from
	s.mu.Unlock()
	if current {
		s.Notify(memoryStateMessage(st))
	}
}

// current returns copies of the cast and the place.
func (s *Session) current() (cast, place) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cast, s.place
}

// Character returns the session's current character.
func (s *Session) Character() Character {
	c, _ := s.current()
	return c.char
}

// Info describes the session.
func (s *Session) Info() protocol.SessionInfo {
	c, p := s.current()
	return protocol.SessionInfo{ClientUID: s.clientUID, ConfUID: c.char.ConfUID, ConfName: c.char.ConfName, HistoryUID: p.uid}
}

// Greet sends the OLV connect sequence, in order.
func (s *Session) Greet() {
	group := protocol.GroupUpdate{Type: protocol.TypeGroupUpdate, Members: []string{}}
	s.reply(group)
	s.reply(protocol.FullText(protocol.ConnectionEstablished))
	s.reply(s.modelAndConf())
	s.reply(group)
	s.reply(protocol.Control(protocol.ControlStartMic))
}

func (s *Session) modelAndConf() protocol.SetModelAndConf {
	ch := s.Character()
	m := protocol.SetModelAndConf{
		Type:      protocol.TypeSetModelAndConf,
		ModelInfo: modelInfoOf(ch.ModelInfo).frame,
		ConfName:  ch.ConfName,
		ConfUID:   ch.ConfUID,
		ClientUID: s.clientUID,
	}
	if s.koeEvents {
		m.CharacterName, m.HumanName = ch.Name, ch.HumanName
	}
	return m
}

// switchCharacter stops the running turn and continues with the character
// of file, in a new history (created with the next turn or
// create-new-history).
func (s *Session) switchCharacter(file string) (Character, error) {
	char, err := s.deps.Characters.Load(file)
	switch {
	case errors.Is(err, ErrNoCharacter):
		return Character{}, &koe.Error{Kind: koe.NotFound, Err: err}
	case err != nil && errors.Is(err, ErrBrokenCharacter):
		return Character{}, refused(err)
	case err != nil:
		return Character{}, fmt.Errorf("load character: %w", err)
	}
	s.turns.stop(errCharacterChanged)
	next := s.buildCast(char)
	s.mu.Lock()
	prev, prevPlace := s.cast, s.place
	s.cast, s.place = next, place{}
	s.mu.Unlock()
	s.hub.applyPrompts(next)
	s.hub.watch.greet(s, char)
	s.hub.retire(prev.agent)
	s.dropIfUnused(prev.char.ConfUID, prevPlace)
	return char, nil
}

// Close stops the running turn (it stores what it has), hands the agent's
// background work to the hub and tidies up. The session is unusable after.
func (s *Session) Close() {
	// A recording still being heard for the group would otherwise put
	// its words to the group after the session left it.
	s.groupHearing.Wait()
	s.leaveGroup()
	s.turns.stop(errSessionClosed)
	s.hub.watch.offAir(s)
	s.hub.forget(s)
	c, p := s.current()
	s.hub.retire(c.agent)
	s.dropIfUnused(c.char.ConfUID, p)
}

// reply sends an answer to the client's request on the session's
// context. Watchers do not see it: it is the client's own business.
func (s *Session) reply(msg any) {
	if err := s.out.Send(s.ctx, msg); err != nil && s.ctx.Err() == nil {
		s.log.Debug("message not queued", "err", err)
	}
}

// send sends a turn's frame to the client and its watchers.
func (s *Session) send(ctx context.Context, msg any) {
	if err := s.emit(ctx, msg); err != nil && ctx.Err() == nil {
		s.log.Debug("message not queued", "err", err)
	}
}
