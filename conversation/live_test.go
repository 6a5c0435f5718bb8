package conversation_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"koe"
	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
	"koe/tts"
)

// liveWatcher records what a watcher is offered, as its writer would
// write it: frames whose context has ended by then are dropped.
type liveWatcher struct{ frames chan mock.Frame }

func newLiveWatcher() *liveWatcher { return &liveWatcher{frames: make(chan mock.Frame, 1<<12)} }

func (w *liveWatcher) Offer(ctx context.Context, data []byte) {
	if ctx.Err() != nil {
		return
	}
	var f mock.Frame
	_ = json.Unmarshal(data, &f)
	f.JSON = data
	w.frames <- f
}

func (w *liveWatcher) until(t *testing.T, typ, text string) []mock.Frame {
	t.Helper()
	var got []mock.Frame
	for {
		select {
		case f := <-w.frames:
			got = append(got, f)
			if f.Type == typ && (text == "" || f.Text == text) {
				return got
			}
		case <-time.After(hangGuard):
			t.Fatalf("watcher: no %s %s within %s; got %v", typ, text, hangGuard, frameTypes(got))
		}
	}
}

func liveSpeech(t *testing.T) rigOption {
	tone, err := tts.FromPCM16LE(pcm(100*time.Millisecond, 0.5), 16000)
	if err != nil {
		t.Fatal(err)
	}
	return withTTS(&mock.Synthesizer{SynthesizeFn: func(context.Context, string) (tts.Audio, error) { return tone, nil }})
}

func openLive(t *testing.T, r *rig) *conversation.Live {
	t.Helper()
	l, err := r.hub.OpenLive(r.ctx, conversation.LiveOptions{Character: "c1", History: "live"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// TestLiveSessionSpeaksToWatchers: a live turn is heard by the
// character's watchers and kept in the live history, which the next live
// session continues.
func TestLiveSessionSpeaksToWatchers(t *testing.T) {
	ctx := t.Context()
	r := newRig(t, fakellm.Echo(0), liveSpeech(t))
	w := newLiveWatcher()
	stop, err := r.hub.Watchers().Watch(protocol.WatchTarget{ConfUID: "c1"}, w, conversation.WatchOptions{ClientUID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	w.until(t, protocol.TypeSetModelAndConf, "")

	l := openLive(t, r)
	if err := l.Say(r.ctx, "viewer Alice says: Hello there. Nice stream."); err != nil {
		t.Fatal(err)
	}
	got := w.until(t, protocol.TypeControl, protocol.ControlChainEnd)
	if !slices.ContainsFunc(got, func(f mock.Frame) bool { return f.Text == protocol.ControlChainStart }) ||
		!slices.ContainsFunc(got, func(f mock.Frame) bool { return f.Type == protocol.TypeAudio }) {
		t.Fatalf("watcher saw %v", frameTypes(got))
	}
	if info := l.Info(); info.ClientUID != "live-c1" || info.HistoryUID != "live" {
		t.Fatalf("live session = %+v", info)
	}
	recs, err := r.real.Messages(ctx, "c1", "live")
	if err != nil {
		t.Fatal(err)
	}
	if humans := roleContents(recs, koe.RoleHuman); !slices.Equal(humans, []string{"viewer Alice says: Hello there. Nice stream."}) {
		t.Fatalf("live history's human records = %v", humans)
	}
	if len(aiRecords(recs)) != 1 {
		t.Fatalf("live history's AI records = %v", aiRecords(recs))
	}

	// A second live session (koe restarted) continues the same history.
	l.Close()
	l2 := openLive(t, r)
	if err := l2.Say(r.ctx, "viewer Bob says: hi"); err != nil {
		t.Fatal(err)
	}
	reqs := r.llm.Requests()
	last := reqs[len(reqs)-1]
	if !slices.ContainsFunc(last.Messages, func(m fakellm.Message) bool { return strings.Contains(m.Content, "viewer Alice says") }) {
		t.Fatalf("the reopened live session forgot the earlier turn: %+v", last.Messages)
	}
}

// TestLiveYieldsToTheStreamer: a turn another session of the character
// starts stops the live turn at once, and its watchers are told.
func TestLiveYieldsToTheStreamer(t *testing.T) {
	ctx := t.Context()
	g := newGate(t)
	r := newRig(t, func(req fakellm.Request) fakellm.Reply {
		if strings.Contains(liveLastUser(req), "viewer") {
			return g.reply("La la la. ", "La la la.")
		}
		return fakellm.Reply{Tokens: fakellm.Words("Streamer first.")}
	}, liveSpeech(t))
	t.Cleanup(g.open) // before the fake LLM's cleanup waits for its streams
	w := newLiveWatcher()
	stop, err := r.hub.Watchers().Watch(protocol.WatchTarget{ConfUID: "c1"}, w, conversation.WatchOptions{ClientUID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	l := openLive(t, r)

	said := make(chan error, 1)
	go func() { said <- l.Say(r.ctx, "viewer Carol says: sing") }()
	w.until(t, protocol.TypeAudio, "") // the live turn is speaking
	r.turn("hold on, chat")
	select {
	case err := <-said:
		if err == nil {
			t.Fatal("the live turn the streamer cut off reports success")
		}
	case <-time.After(hangGuard):
		t.Fatal("the live turn did not stop")
	}
	w.until(t, protocol.TypeControl, protocol.ControlInterrupt)
	recs, err := r.real.Messages(ctx, "c1", "live")
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.Role == koe.RoleAI && !rec.Interrupted {
			t.Fatalf("the cut-off live reply is stored as complete: %+v", rec)
		}
	}
}

// TestLiveWaitsForTheStreamer: a live turn does not start while another
// session of the character runs a turn.
func TestLiveWaitsForTheStreamer(t *testing.T) {
	g := newGate(t)
	var r *rig
	streamerDone := make(chan bool, 1)
	r = newRig(t, func(req fakellm.Request) fakellm.Reply {
		if strings.Contains(liveLastUser(req), "viewer") {
			// The streamer's turn must have ended (chain-end sent) before
			// the live turn asks the LLM anything.
			streamerDone <- slices.ContainsFunc(r.out.All(), func(f mock.Frame) bool { return f.Text == protocol.ControlChainEnd })
			return fakellm.Reply{Tokens: fakellm.Words("Hi Dave.")}
		}
		return g.reply("One ", "moment.")
	}, liveSpeech(t))
	l := openLive(t, r)

	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "let me tell you something"})
	r.until(protocol.TypeControl, protocol.ControlChainStart)
	said := make(chan error, 1)
	go func() { said <- l.Say(r.ctx, "viewer Dave says: hey") }()
	g.open()
	r.until(protocol.TypeBackendSynthComplete, "")
	played(r.sess)
	r.until(protocol.TypeControl, protocol.ControlChainEnd)
	select {
	case err := <-said:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the live turn never ran")
	}
	if !<-streamerDone {
		t.Fatal("the live turn called the LLM while the streamer's turn ran")
	}
}

// TestLiveSkip: ending Say's context stops that turn only.
func TestLiveSkip(t *testing.T) {
	g := newGate(t)
	asked := make(chan struct{}, 1)
	r := newRig(t, func(req fakellm.Request) fakellm.Reply {
		// (The skipped message and the next one reach the LLM as one
		// user message.)
		if strings.HasSuffix(liveLastUser(req), "skip me") {
			asked <- struct{}{}
			return g.reply("Long ", "story.")
		}
		return fakellm.Reply{Tokens: fakellm.Words("Short.")}
	}, liveSpeech(t))
	t.Cleanup(g.open)
	l := openLive(t, r)
	ctx, cancel := context.WithCancel(r.ctx)
	said := make(chan error, 1)
	go func() { said <- l.Say(ctx, "viewer Eve says: skip me") }()
	// The LLM has the request (the gate holds its stream) before the skip.
	select {
	case <-asked:
	case <-time.After(hangGuard):
		t.Fatal("no LLM request")
	}
	cancel()
	if err := <-said; !errors.Is(err, context.Canceled) {
		t.Fatalf("a skipped Say returned %v", err)
	}
	if err := l.Say(r.ctx, "viewer Eve says: again"); err != nil {
		t.Fatalf("the live session after a skip: %v", err)
	}
}

func roleContents(recs []koe.Record, role string) []string {
	var out []string
	for _, r := range recs {
		if r.Role == role {
			out = append(out, r.Content)
		}
	}
	return out
}

// liveLastUser is the text of a request's latest user message.
func liveLastUser(req fakellm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return req.Messages[i].Content
		}
	}
	return ""
}
