// Package conversation runs one client's conversation: the turn state
// machine, interrupts, history switching and what is sent when. It talks to
// the client only through a Sender and to the LLM only through the agent.
package conversation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"koe/agent"
	"koe/history"
	"koe/protocol"
	"koe/tts"
)

// HistoryStore is the persistence a session needs.
type HistoryStore interface {
	Create(confUID string) (string, error)
	CreateWith(confUID, historyUID string, records ...history.Record) error
	Append(confUID, historyUID string, r history.Record) error
	Messages(confUID, historyUID string) ([]history.Record, error)
	List(confUID string) ([]history.Summary, error)
	Delete(confUID, historyUID string) error
	AddSummary(confUID, historyUID string, r history.SummaryRecord) error
	Summaries(confUID, historyUID string) ([]history.SummaryRecord, error)
	SetPrompt(confUID, name, text string) error
	Prompt(confUID, name string) (string, bool, error)
}

// Sender delivers messages to the client, in the order they were sent.
type Sender interface {
	// Send queues msg. If ctx ends before the writer reaches msg, msg is
	// dropped unsent: that is how a cancelled turn goes silent at once.
	Send(ctx context.Context, msg any) error
	// SendWait queues msg and returns once it has been written to the socket.
	SendWait(ctx context.Context, msg any) error
}

// Deps are what every session of a server shares.
type Deps struct {
	Config Config
	Store  HistoryStore
	// NewLLM builds the LLM client for a character's settings.
	NewLLM func(agent.Config) agent.LLM
	// NewTTS builds the speech engine for a character's settings.
	NewTTS func(tts.Config) (Synthesizer, error)
	// SpeechSlots bounds syntheses across all sessions; nil = no bound.
	SpeechSlots *SpeechSlots
	// ASR transcribes recordings (nil: speech input is off, ASRErr says why).
	ASR    Transcriber
	ASRErr error
	// ASRSlots bounds transcriptions across all sessions; nil = no bound.
	ASRSlots chan struct{}
	Logger   *slog.Logger
}

// ErrEmptyInput is returned for a text input with nothing in it.
var ErrEmptyInput = errors.New("empty input: type something first")

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

// Session is one client's conversation. Its methods are called from the
// connection's read loop; each turn runs in a goroutine the session owns.
type Session struct {
	deps Deps
	out  Sender
	log  *slog.Logger
	ctx  context.Context

	mu          sync.Mutex
	char        Character
	agent       *agent.Agent
	tts         Synthesizer // nil when the engine could not be built
	ttsErr      error       // why, told to the client once
	emotions    []string
	historyUID  string
	historyUsed bool // the current history holds more than its metadata
	turn        *turn
	mic         micBuffer
	raw         *rawStream
}

// NewSession starts a conversation with char. ctx bounds the session's life.
func NewSession(ctx context.Context, deps Deps, char Character, out Sender) *Session {
	logger := deps.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &Session{deps: deps, out: out, log: logger, ctx: ctx}
	s.setCharacter(char)
	return s
}

// Character returns the session's current character.
func (s *Session) Character() Character {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.char
}

// HistoryUID returns the current history id ("" before the first turn).
func (s *Session) HistoryUID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.historyUID
}

// Memory returns a copy of the agent's memory (for inspection and tests).
func (s *Session) Memory() []agent.Message {
	return s.currentAgent().Memory()
}

// setCharacter builds the character's agent (closing the previous one)
// with the system prompt and reminder the user saved for it.
func (s *Session) setCharacter(char Character) {
	if s.agent != nil {
		s.agent.Close()
	}
	s.char = char
	system, reminder := s.prompt(char.ConfUID, history.PromptSystem), s.prompt(char.ConfUID, history.PromptReminder)
	s.agent = agent.New(agent.Options{
		LLM:           s.deps.NewLLM(char.LLM),
		Model:         char.LLM.Model,
		ContextWindow: char.LLM.ContextWindow,
		Vision:        char.LLM.Vision,
		Memory:        char.Memory,
		SystemPrompt:  system,
		Persona:       char.Persona,
		Reminder:      reminder,
		CharacterName: char.Name,
		HumanName:     char.HumanName,
		Store:         s.deps.Store,
		OnSummary: func(st agent.MemoryState) {
			s.send(s.ctx, protocol.MemoryState{Type: protocol.TypeMemoryState, MemoryState: st})
		},
		Logger: s.log,
	})
	s.tts, s.ttsErr = nil, nil
	if s.deps.NewTTS != nil {
		s.tts, s.ttsErr = s.deps.NewTTS(char.TTS)
		if s.ttsErr != nil {
			s.log.Error("speech engine unavailable; replies will be text only", "conf_uid", char.ConfUID, "err", s.ttsErr)
		}
	}
	s.emotions = emotionKeywords(char.ModelInfo)
}

// StartText cancels the running turn, if any, and starts a new one.
func (s *Session) StartText(text string, images []protocol.Image) error {
	imgs, err := validateImages(images, s.deps.Config)
	if err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" && len(imgs) == 0 {
		return ErrEmptyInput
	}
	s.start(turnInput{text: text, images: imgs})
	return nil
}

// start cancels the running turn, if any, and starts a new one.
func (s *Session) start(in turnInput) {
	s.stopTurn(errSuperseded)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := newTurn(s.ctx)
	s.turn = t
	go s.runTurn(t, in)
}

// Interrupt stops the running turn at once. heard is what the user actually
// heard of the reply; memory and history keep only that.
func (s *Session) Interrupt(heard string) {
	if !s.stopTurn(interruptCause{heard: heard}) {
		s.log.Debug("interrupt with no running turn")
	}
}

// PlaybackComplete records that the client played the whole turn. Clients
// send it several times per turn; only the first one counts.
func (s *Session) PlaybackComplete() {
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	if t != nil {
		t.playbackComplete()
	}
}

// HistoryList lists the character's non-empty histories, newest first.
func (s *Session) HistoryList() ([]history.Summary, error) {
	return s.deps.Store.List(s.Character().ConfUID)
}

// SetHistory switches to history uid and rebuilds memory from it. A bad or
// unknown id changes nothing.
func (s *Session) SetHistory(uid string) ([]history.Record, error) {
	conf := s.Character().ConfUID
	if _, err := s.deps.Store.Messages(conf, uid); err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	// Read again once the running turn has stopped: it may just have
	// stored its reply in this very history.
	s.stopTurn(errHistoryChanged)
	records, err := s.deps.Store.Messages(conf, uid)
	if err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if uid != s.historyUID {
		s.dropUnusedHistoryLocked()
	}
	summaries, err := s.deps.Store.Summaries(conf, uid)
	if err != nil {
		s.log.Warn("could not load the history's summaries; they will be made again", "history_uid", uid, "err", err)
		summaries = nil
	}
	s.historyUID = uid
	s.historyUsed = true
	s.agent.Load(agent.Thread{ConfUID: conf, HistoryUID: uid}, toMemory(records), summaries)
	return visible(records), nil
}

// NewHistory starts a fresh, empty history.
func (s *Session) NewHistory() (string, error) {
	s.stopTurn(errHistoryChanged)
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, err := s.deps.Store.Create(s.char.ConfUID)
	if err != nil {
		return "", fmt.Errorf("create history: %w", err)
	}
	s.dropUnusedHistoryLocked()
	s.historyUID, s.historyUsed = uid, false
	s.agent.Load(agent.Thread{ConfUID: s.char.ConfUID, HistoryUID: uid}, nil, nil)
	return uid, nil
}

// DeleteHistory deletes history uid; deleting the current one empties memory.
func (s *Session) DeleteHistory(uid string) error {
	s.mu.Lock()
	current := uid == s.historyUID
	conf := s.char.ConfUID
	s.mu.Unlock()
	if current {
		s.stopTurn(errHistoryChanged)
	}
	if err := s.deps.Store.Delete(conf, uid); err != nil {
		return fmt.Errorf("delete history: %w", err)
	}
	if current {
		s.mu.Lock()
		s.historyUID, s.historyUsed = "", false
		s.agent.Load(agent.Thread{ConfUID: conf}, nil, nil)
		s.mu.Unlock()
	}
	return nil
}

// SwitchCharacter stops the running turn and continues with char, in a new
// history (created with the next turn or create-new-history).
func (s *Session) SwitchCharacter(char Character) {
	s.stopTurn(errCharacterChanged)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropUnusedHistoryLocked()
	s.historyUID, s.historyUsed = "", false
	s.setCharacter(char)
}

// Close stops the running turn (persisting what it has) and background
// summaries, and tidies up.
func (s *Session) Close() {
	s.stopTurn(errSessionClosed)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agent.Close()
	s.dropUnusedHistoryLocked()
}

// dropUnusedHistoryLocked deletes the current history if nothing was ever
// said in it: the OLV client creates one on every connect, and without this
// the database would fill with empty histories.
func (s *Session) dropUnusedHistoryLocked() {
	if s.historyUID == "" || s.historyUsed {
		return
	}
	if err := s.deps.Store.Delete(s.char.ConfUID, s.historyUID); err != nil && !errors.Is(err, history.ErrNotFound) {
		s.log.Warn("could not delete unused history", "history_uid", s.historyUID, "err", err)
	}
	s.historyUID = ""
}

// stopTurn cancels the running turn with cause and waits until it has
// finished (and persisted). It reports whether a turn was running.
func (s *Session) stopTurn(cause error) bool {
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	if t == nil {
		return false
	}
	t.cancel(cause)
	<-t.done
	return true
}

func toMemory(records []history.Record) []agent.Message {
	msgs := make([]agent.Message, 0, len(records))
	for _, r := range records {
		switch {
		case r.Role == history.RoleHuman || (r.Role == history.RoleSystem && r.Name == proactiveName):
			m := agent.Message{Role: agent.RoleUser, Content: r.Content}
			for _, img := range r.Images {
				m.Images = append(m.Images, agent.Image{Source: img.Source, MimeType: img.MimeType, Data: img.Data})
			}
			msgs = append(msgs, m)
		case r.Role == history.RoleAI:
			msgs = append(msgs, agent.Message{Role: agent.RoleAssistant, Content: r.Content, Interrupted: r.Interrupted})
		}
	}
	return msgs
}

// visible drops the records a client does not show (metadata, system).
func visible(records []history.Record) []history.Record {
	out := make([]history.Record, 0, len(records))
	for _, r := range records {
		if r.Role == history.RoleHuman || r.Role == history.RoleAI {
			out = append(out, r)
		}
	}
	return out
}
