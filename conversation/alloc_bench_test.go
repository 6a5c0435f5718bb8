package conversation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"koe/agent"
	"koe/bolt"
	"koe/conversation"
	"koe/histories"
	"koe/llm"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/mock"
)

// encodingSender encodes every frame as the server's connections do and
// keeps none, so that a benchmark counts what a session allocates for its
// frames and not what a recording sender adds. It tells on turnDone when a
// turn has ended and on synthDone when its last piece is out.
type encodingSender struct {
	synthDone chan struct{}
	turnDone  chan struct{}
}

func newEncodingSender() *encodingSender {
	return &encodingSender{synthDone: make(chan struct{}, 1), turnDone: make(chan struct{}, 1)}
}

func (s *encodingSender) Send(_ context.Context, msg any) error {
	if _, err := json.Marshal(msg); err != nil {
		return fmt.Errorf("encode %T: %w", msg, err)
	}
	switch m := msg.(type) {
	case protocol.Simple:
		if m.Type == protocol.TypeBackendSynthComplete {
			s.synthDone <- struct{}{}
		}
	case protocol.Text:
		if m.Type == protocol.TypeControl && m.Text == protocol.ControlChainEnd {
			s.turnDone <- struct{}{}
		}
	}
	return nil
}

func (s *encodingSender) SendWait(ctx context.Context, msg any) error { return s.Send(ctx, msg) }

// benchModelInfo is a Live2D model's description as a character's YAML
// gives it (the shape of the default, mao_pro).
func benchModelInfo() map[string]any {
	return map[string]any{
		"name": "mao_pro", "description": "", "url": "/live2d-models/mao_pro/runtime/mao_pro.model3.json",
		"kScale": 0.5, "initialXshift": 0, "initialYshift": 0, "kXOffset": 1150, "idleMotionGroupName": "Idle",
		"emotionMap":     map[string]any{"neutral": 0, "anger": 2, "disgust": 2, "fear": 1, "joy": 3, "smirk": 3, "sadness": 1, "surprise": 3},
		"tapMotions":     map[string]any{"HitAreaHead": map[string]any{"": 1}, "HitAreaBody": map[string]any{"": 1}},
		"defaultEmotion": 0, "pointerInteractive": true, "scrollToResize": true,
		"initialScale": nil, "idleMotionGroupIndex": nil,
	}
}

// benchHub is a hub as app builds it for one character with a Live2D
// model, on a real bbolt store and a fake LLM that answers reply.
func benchHub(b *testing.B, reply string) *conversation.Hub {
	b.Helper()
	fake := koetest.StartLLM(b, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(reply)}))
	fake.SetRecording(false)
	store, err := bolt.Open(filepath.Join(b.TempDir(), "koe.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	char := character("c1", fake.URL())
	char.ModelInfo = benchModelInfo()
	chars := &mock.Characters{DefaultChar: char}
	log := slog.New(slog.DiscardHandler)
	deps := conversation.Deps{
		Config:     conversation.DefaultConfig(),
		Store:      store,
		Characters: chars,
		NewLLM:     func(c agent.Config) agent.LLM { return llm.New(c, nil) },
		Logger:     log,
		Histories:  histories.New(histories.Options{Store: store, Characters: chars, Logger: log}),
	}
	deps.Config.PlaybackTimeout = hangGuard
	hub := conversation.NewHub(deps)
	b.Cleanup(func() {
		hub.Close()
		if err := store.Close(); err != nil {
			b.Error(err)
		}
	})
	return hub
}

// BenchmarkGreet is a new session's greeting, the OLV connect sequence:
// the set-model-and-conf frame carries the character's model_info.
//
//	go test ./conversation -run '^$' -bench Greet -benchmem
func BenchmarkGreet(b *testing.B) {
	hub := benchHub(b, "Hello.")
	out := newEncodingSender()
	b.ReportAllocs()
	for b.Loop() {
		s := hub.Open(b.Context(), out, conversation.SessionOptions{ClientUID: "bench"})
		s.Greet()
		s.Close()
	}
}

// BenchmarkFirstTextTurn is a new session's first typed turn, greeted,
// replied to and closed, as koe-load plays it: olv is a client that did
// not ask for koe's own events (tokens, status), koe-events one that did.
//
//	go test ./conversation -run '^$' -bench FirstTextTurn -benchmem
func BenchmarkFirstTextTurn(b *testing.B) {
	const reply = "Sure, I can help with that. Let me think about it for a moment. " +
		"Here is what I would suggest, step by step, so that nothing gets lost."
	for _, koeEvents := range []bool{false, true} {
		name := "olv"
		if koeEvents {
			name = "koe-events"
		}
		b.Run(name, func(b *testing.B) {
			hub := benchHub(b, reply)
			out := newEncodingSender()
			b.ReportAllocs()
			for b.Loop() {
				s := hub.Open(b.Context(), out, conversation.SessionOptions{ClientUID: "bench", KoeEvents: koeEvents})
				s.Greet()
				if err := s.Dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "Can you help me plan my week?"}); err != nil {
					b.Fatal(err)
				}
				benchWait(b, out.synthDone)
				played(s)
				benchWait(b, out.turnDone)
				s.Close()
			}
		})
	}
}

// benchWait waits for a signal of the encodingSender; hangGuard is only
// there to end a benchmark that would hang.
func benchWait(b *testing.B, c <-chan struct{}) {
	b.Helper()
	select {
	case <-c:
	case <-time.After(hangGuard):
		b.Fatalf("no frame within %s", hangGuard)
	}
}
