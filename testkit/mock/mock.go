// Package mock holds small fakes of the interfaces the conversation layer
// consumes (the client's Sender, the history store, characters, speech
// engines), for unit tests of sessions without a server. Each fake either
// records what it was given or calls a function field the test sets;
// unset hooks fall through to a real implementation where there is one.
//
// The LLM is never faked here: tests run the real agent against
// testkit/fakellm over HTTP, so the client code is exercised too.
package mock

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"koe"
	"koe/conversation"
	"koe/protocol"
	"koe/tts"
)

// Frame is one message a Sender was given, as JSON.
type Frame struct {
	Type string
	Text string // the text field of control, full-text and error frames
	JSON []byte
	// Dropped: its context had ended when it was sent (a real connection
	// drops such frames unwritten).
	Dropped bool
}

// Sender records every message a session sends, in order, and delivers
// them on Frames. Block, when set, is called before a message is taken
// (a client that stops reading).
type Sender struct {
	Frames chan Frame
	Block  func(ctx context.Context)

	mu  sync.Mutex
	all []Frame
}

// NewSender returns a Sender whose channel holds n frames before a send
// blocks (as a full connection queue does).
func NewSender(n int) *Sender { return &Sender{Frames: make(chan Frame, n)} }

var _ conversation.Sender = (*Sender)(nil)

// Send implements conversation.Sender.
func (s *Sender) Send(ctx context.Context, msg any) error {
	if s.Block != nil {
		s.Block(ctx)
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode %T: %w", msg, err)
	}
	var head struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(data, &head)
	f := Frame{Type: head.Type, Text: head.Text + head.Message, JSON: data, Dropped: ctx.Err() != nil}
	s.mu.Lock()
	s.all = append(s.all, f)
	s.mu.Unlock()
	if f.Dropped {
		return ctx.Err()
	}
	select {
	case s.Frames <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SendWait implements conversation.Sender: a recorded frame counts as
// written.
func (s *Sender) SendWait(ctx context.Context, msg any) error { return s.Send(ctx, msg) }

// All returns every frame sent so far, dropped ones included.
func (s *Sender) All() []Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Frame(nil), s.all...)
}

// Store is a history store whose methods can be intercepted: a nil hook
// calls the real store underneath.
type Store struct {
	conversation.HistoryStore

	AppendFn     func(ctx context.Context, confUID, historyUID string, r koe.Record) error
	AddSummaryFn func(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error
	DeleteFn     func(ctx context.Context, confUID, historyUID string) error
}

// Append implements conversation.HistoryStore.
func (s *Store) Append(ctx context.Context, confUID, historyUID string, r koe.Record) error {
	if s.AppendFn != nil {
		return s.AppendFn(ctx, confUID, historyUID, r)
	}
	return s.HistoryStore.Append(ctx, confUID, historyUID, r)
}

// AddSummary implements conversation.HistoryStore.
func (s *Store) AddSummary(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error {
	if s.AddSummaryFn != nil {
		return s.AddSummaryFn(ctx, confUID, historyUID, r)
	}
	return s.HistoryStore.AddSummary(ctx, confUID, historyUID, r)
}

// Delete implements conversation.HistoryStore.
func (s *Store) Delete(ctx context.Context, confUID, historyUID string) error {
	if s.DeleteFn != nil {
		return s.DeleteFn(ctx, confUID, historyUID)
	}
	return s.HistoryStore.Delete(ctx, confUID, historyUID)
}

// Characters serves a fixed set of characters: Default, plus Files by
// file name.
type Characters struct {
	DefaultChar conversation.Character
	Files       map[string]conversation.Character
}

var _ conversation.CharacterSource = (*Characters)(nil)

// Default implements conversation.CharacterSource.
func (c *Characters) Default() conversation.Character { return c.DefaultChar }

// List implements conversation.CharacterSource.
func (c *Characters) List() ([]protocol.ConfigFile, error) {
	out := []protocol.ConfigFile{{Filename: "conf.yaml", Name: c.DefaultChar.ConfName}}
	for name, ch := range c.Files {
		out = append(out, protocol.ConfigFile{Filename: name, Name: ch.ConfName})
	}
	return out, nil
}

// Load implements conversation.CharacterSource.
func (c *Characters) Load(file string) (conversation.Character, error) {
	if file == "conf.yaml" {
		return c.DefaultChar, nil
	}
	ch, ok := c.Files[file]
	if !ok {
		return conversation.Character{}, fmt.Errorf("%w: no character file %q", conversation.ErrNoCharacter, file)
	}
	return ch, nil
}

// Has implements conversation.CharacterSource.
func (c *Characters) Has(confUID string) bool {
	_, ok := c.Find(confUID)
	return ok
}

// Find implements conversation.CharacterSource.
func (c *Characters) Find(confUID string) (conversation.Character, bool) {
	if confUID == c.DefaultChar.ConfUID {
		return c.DefaultChar, true
	}
	for _, ch := range c.Files {
		if ch.ConfUID == confUID {
			return ch, true
		}
	}
	return conversation.Character{}, false
}

// Synthesizer is a speech engine whose SynthesizeFn the test sets.
type Synthesizer struct {
	SynthesizeFn func(ctx context.Context, text string) (tts.Audio, error)
}

// Synthesize implements conversation.Synthesizer.
func (s *Synthesizer) Synthesize(ctx context.Context, text string) (tts.Audio, error) {
	return s.SynthesizeFn(ctx, text)
}

// Transcriber is a speech recogniser whose TranscribeFn the test sets.
type Transcriber struct {
	TranscribeFn func(ctx context.Context, wav []byte) (string, error)
}

// Transcribe implements conversation.Transcriber.
func (t *Transcriber) Transcribe(ctx context.Context, wav []byte) (string, error) {
	return t.TranscribeFn(ctx, wav)
}
