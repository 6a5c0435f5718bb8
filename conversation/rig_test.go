package conversation_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"koe"
	"koe/agent"
	"koe/bolt"
	"koe/conversation"
	"koe/histories"
	"koe/llm"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/mock"
	"koe/tts"
)

// hangGuard bounds every wait in these tests: reached, it means a hang,
// never slowness (the waits are for events, not for time).
const hangGuard = 30 * time.Second

// rig is one session on a hub with a real bbolt store (wrapped so tests
// can intercept it), a fake LLM over HTTP and a recording Sender.
type rig struct {
	t     testing.TB
	llm   *fakellm.Server
	real  *bolt.Store
	store *mock.Store
	chars *mock.Characters
	hub   *conversation.Hub
	out   *mock.Sender
	sess  *conversation.Session
	ctx   context.Context
}

type rigOption func(*conversation.Deps)

// withASR gives the hub a speech recogniser.
func withASR(t conversation.Transcriber) rigOption {
	return func(d *conversation.Deps) { d.ASR = t }
}

// withTTS gives every character the speech engine syn.
func withTTS(syn conversation.Synthesizer) rigOption {
	return func(d *conversation.Deps) {
		d.NewTTS = func(tts.Config) (conversation.Synthesizer, error) { return syn, nil }
	}
}

// quiet discards the logs (a fuzz target may not log through its F).
func quiet() rigOption {
	return func(d *conversation.Deps) { d.Logger = slog.New(slog.DiscardHandler) }
}

func character(confUID, llmURL string) conversation.Character {
	return conversation.Character{
		ConfName:  confUID,
		ConfUID:   confUID,
		Name:      "Koe",
		HumanName: "Human",
		Persona:   "You are Koe.",
		LLM:       agent.Config{BaseURL: llmURL, Model: fakellm.ModelID, IdleTimeout: hangGuard, ContextWindow: 8192},
		Memory:    agent.DefaultMemoryConfig(),
	}
}

func newRig(t testing.TB, respond func(fakellm.Request) fakellm.Reply, opts ...rigOption) *rig {
	t.Helper()
	fake := koetest.StartLLM(t, respond)
	real, err := bolt.Open(filepath.Join(t.TempDir(), "koe.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, llm: fake, real: real, store: &mock.Store{HistoryStore: real}}
	r.chars = &mock.Characters{
		DefaultChar: character("c1", fake.URL()),
		Files:       map[string]conversation.Character{"other.yaml": character("c2", fake.URL())},
	}
	deps := conversation.Deps{
		Config:     conversation.DefaultConfig(),
		Store:      r.store,
		Characters: r.chars,
		NewLLM:     func(c agent.Config) agent.LLM { return llm.New(c, nil) },
		Logger:     koetest.Logger(t),
	}
	deps.Config.PlaybackTimeout = hangGuard
	deps.Histories = histories.New(histories.Options{Store: real, Characters: r.chars, PageLimit: deps.Config.HistoryMessages,
		Saved: func(conf string) { r.hub.PromptsChanged(conf) }, Logger: deps.Logger})
	for _, o := range opts {
		o(&deps)
	}
	r.hub = conversation.NewHub(deps)
	r.out = mock.NewSender(1 << 14)
	ctx, cancel := context.WithCancel(context.Background())
	r.ctx = ctx
	r.sess = r.hub.Open(ctx, r.out, conversation.SessionOptions{ClientUID: "client-1", KoeEvents: true, Logger: deps.Logger})
	t.Cleanup(func() {
		r.sess.Close()
		cancel()
		r.hub.Close()
		if err := real.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// next returns the next frame the session sent.
func (r *rig) next() mock.Frame {
	r.t.Helper()
	select {
	case f := <-r.out.Frames:
		return f
	case <-time.After(hangGuard):
		r.t.Fatalf("no frame within %s; sent so far: %v", hangGuard, frameTypes(r.out.All()))
		return mock.Frame{}
	}
}

// until reads frames up to and including the first that matches.
func (r *rig) until(typ, text string) []mock.Frame {
	r.t.Helper()
	var got []mock.Frame
	for {
		f := r.next()
		got = append(got, f)
		if f.Type == typ && (text == "" || f.Text == text) {
			return got
		}
	}
}

// dispatch sends a client message and fails the test on an error.
func (r *rig) dispatch(in protocol.Inbound) {
	r.t.Helper()
	if err := r.sess.Dispatch(in); err != nil {
		r.t.Fatalf("%s: %v", in.Type, err)
	}
}

// answer dispatches a client message and decodes the session's answer,
// the next frame of type typ, into v.
func (r *rig) answer(in protocol.Inbound, typ string, v any) {
	r.t.Helper()
	r.dispatch(in)
	got := r.until(typ, "")
	mustUnmarshal(r.t, got[len(got)-1].JSON, v)
}

// played tells a session that its client played the whole turn, as the
// OLV client does (it cannot fail).
func played(sess *conversation.Session) {
	_ = sess.Dispatch(protocol.Inbound{Type: protocol.TypeFrontendPlaybackComplete})
}

// turn plays a whole typed turn as the OLV client does.
func (r *rig) turn(text string) []mock.Frame {
	r.t.Helper()
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: text})
	return r.playedTurn(text)
}

// playedTurn reads the turn just started to its end, playing it as the
// OLV client does, and fails the test on an error frame.
func (r *rig) playedTurn(text string) []mock.Frame {
	r.t.Helper()
	got := r.until(protocol.TypeBackendSynthComplete, "")
	played(r.sess)
	got = append(got, r.until(protocol.TypeControl, protocol.ControlChainEnd)...)
	for _, f := range got {
		if f.Type == protocol.TypeError {
			r.t.Fatalf("turn %q: error frame %s", text, f.JSON)
		}
	}
	return got
}

// records reads the current history of the session from the real store.
func (r *rig) records() []koe.Record {
	r.t.Helper()
	info := r.sess.Info()
	recs, err := r.real.Messages(r.t.Context(), info.ConfUID, info.HistoryUID)
	if err != nil {
		r.t.Fatal(err)
	}
	return recs
}

func frameTypes(fs []mock.Frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Type
		if f.Type == protocol.TypeControl {
			out[i] += ":" + f.Text
		}
	}
	return out
}

// aiRecords lists the stored AI replies as "text" or "text [interrupted]".
func aiRecords(recs []koe.Record) []string {
	var out []string
	for _, r := range recs {
		if r.Role == koe.RoleAI {
			s := r.Content
			if r.Interrupted {
				s += " [interrupted]"
			}
			out = append(out, s)
		}
	}
	return out
}

// gate holds a fake LLM stream after its first chunk until the client goes
// away (a turn is stopped) or the test ends.
type gate struct {
	release chan struct{}
	once    sync.Once
}

func newGate(t testing.TB) *gate {
	g := &gate{release: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// reply streams tokens, holding before the second one.
func (g *gate) reply(tokens ...string) fakellm.Reply {
	return fakellm.Reply{Tokens: tokens, BeforeChunk: func(i int) {
		if i == 1 {
			<-g.release
		}
	}}
}

// olvSession is a second session on the rig's hub, for a client that did
// not ask for koe's events.
type olvSession struct {
	sess *conversation.Session
	out  *mock.Sender
}

func newOLVSession(r *rig) *olvSession {
	o := &olvSession{out: mock.NewSender(1 << 12)}
	o.sess = r.hub.Open(r.ctx, o.out, conversation.SessionOptions{ClientUID: "olv-client"})
	r.t.Cleanup(o.sess.Close)
	return o
}

func (o *olvSession) next(t *testing.T) mock.Frame {
	t.Helper()
	select {
	case f := <-o.out.Frames:
		return f
	case <-time.After(hangGuard):
		t.Fatalf("no frame within %s", hangGuard)
		return mock.Frame{}
	}
}

func mustUnmarshal(t testing.TB, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}
