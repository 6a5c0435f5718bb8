package conversation_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
)

// ctxWatcher records what it is offered with the context it came with.
type ctxWatcher struct{ got chan offered }

type offered struct {
	ctx  context.Context
	data string
}

func newCtxWatcher() *ctxWatcher { return &ctxWatcher{got: make(chan offered, 64)} }

func (w *ctxWatcher) Offer(ctx context.Context, data []byte) { w.got <- offered{ctx, string(data)} }

func (w *ctxWatcher) next(t *testing.T) offered {
	t.Helper()
	select {
	case o := <-w.got:
		return o
	case <-time.After(hangGuard):
		t.Fatalf("nothing offered within %s", hangGuard)
	}
	return offered{}
}

func (w *ctxWatcher) none(t *testing.T) {
	t.Helper()
	select {
	case o := <-w.got:
		t.Fatalf("offered %q, want nothing", o.data)
	default:
	}
}

// TestRelayedFramesReachWatchers: frames relayed from another instance
// reach this instance's watchers of their client and character; a relayed
// stop ends the context of its turn's frames, those still queued and any
// that follow; a relayed greeting greets the client's watchers.
func TestRelayedFramesReachWatchers(t *testing.T) {
	r := newRig(t, fakellm.Echo(0))
	byConf, byClient, koe := newCtxWatcher(), newCtxWatcher(), newCtxWatcher()
	for _, w := range []struct {
		w      *ctxWatcher
		target protocol.WatchTarget
		koe    bool
	}{
		{byConf, protocol.WatchTarget{ConfUID: "c1"}, false},
		{byClient, protocol.WatchTarget{ClientUID: "desk"}, false},
		{koe, protocol.WatchTarget{ClientUID: "desk"}, true},
	} {
		stop, err := r.hub.Watchers().Watch(w.target, w.w, conversation.WatchOptions{ClientUID: "w", KoeEvents: w.koe})
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	for range 4 { // the conf watcher's greeting
		byConf.next(t)
	}

	frame := func(kind conversation.RelayKind, client, turn, data string) conversation.RelayedFrame {
		return conversation.RelayedFrame{Kind: kind, ClientUID: client, ConfUID: "c1", Turn: turn, Data: []byte(data)}
	}
	r.hub.Watchers().Relayed(frame(conversation.RelayFrame, "desk", "t1", "one"))
	first := []offered{byClient.next(t), byConf.next(t), koe.next(t)}
	for _, o := range first {
		if o.data != "one" || o.ctx.Err() != nil {
			t.Fatalf("offered %q (ctx %v)", o.data, o.ctx.Err())
		}
	}
	// A koe event goes to the koe watcher only; another client's frame to
	// the character's watchers only.
	r.hub.Watchers().Relayed(frame(conversation.RelayKoeFrame, "desk", "t1", "token"))
	if o := koe.next(t); o.data != "token" {
		t.Fatalf("koe watcher offered %q", o.data)
	}
	r.hub.Watchers().Relayed(frame(conversation.RelayFrame, "someone", "", "theirs"))
	if o := byConf.next(t); o.data != "theirs" || o.ctx != context.Background() {
		t.Fatalf("conf watcher offered %q", o.data)
	}
	byClient.none(t)

	r.hub.Watchers().Relayed(conversation.RelayedFrame{Kind: conversation.RelayEnd, ClientUID: "desk", ConfUID: "c1", Turn: "t1"})
	for _, o := range first {
		if o.ctx.Err() == nil {
			t.Fatal("a relayed stop left its turn's queued frames alive")
		}
	}
	r.hub.Watchers().Relayed(frame(conversation.RelayFrame, "desk", "t1", "late"))
	if o := byClient.next(t); o.data != "late" || o.ctx.Err() == nil {
		t.Fatalf("a frame of a stopped turn offered %q with a live context", o.data)
	}
	r.hub.Watchers().Relayed(frame(conversation.RelayFrame, "desk", "t2", "next turn"))
	if o := byClient.next(t); o.ctx.Err() != nil {
		t.Fatal("another turn's frame came with an ended context")
	}
	for _, w := range []*ctxWatcher{byConf, koe} {
		if a, b := w.next(t), w.next(t); a.data != "late" || b.data != "next turn" {
			t.Fatalf("offered %q, %q", a.data, b.data)
		}
	}

	// A greeting: the client talks as c2 now.
	r.hub.Watchers().Relayed(conversation.RelayedFrame{Kind: conversation.RelayGreet, ClientUID: "desk", ConfUID: "c2"})
	var greeting []string
	for range 4 {
		greeting = append(greeting, byClient.next(t).data)
	}
	var conf protocol.SetModelAndConf
	if err := json.Unmarshal([]byte(greeting[2]), &conf); err != nil || conf.ConfUID != "c2" || conf.ClientUID != "w" {
		t.Fatalf("greeting %q", greeting)
	}
	r.hub.Watchers().Relayed(conversation.RelayedFrame{Kind: conversation.RelayGreet, ClientUID: "desk", ConfUID: "nobody"})
	byClient.none(t)
	byConf.none(t)
}

// fakeRelay records what the hub relays; other instances watch c1.
type fakeRelay struct {
	mu      sync.Mutex
	follows []string
	sent    chan conversation.RelayedFrame
}

func (f *fakeRelay) Any() bool { return true }
func (f *fakeRelay) Wanted(clientUID, conf string) bool {
	return conf == "c1" || clientUID == "client-1"
}
func (f *fakeRelay) Send(fr conversation.RelayedFrame) { f.sent <- fr }
func (f *fakeRelay) Follow(t protocol.WatchTarget, on bool, seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.follows = append(f.follows, t.String()+map[bool]string{true: " on", false: " off"}[on]+" "+string(rune('0'+seq)))
}

func (f *fakeRelay) next(t *testing.T) conversation.RelayedFrame {
	t.Helper()
	select {
	case fr := <-f.sent:
		return fr
	case <-time.After(hangGuard):
		t.Fatalf("nothing relayed within %s", hangGuard)
	}
	return conversation.RelayedFrame{}
}

// TestSessionRelaysToOtherInstances: with a relay, a session's turn goes
// to other instances' watchers, with its turn, and so does the news of its
// stop; this instance's first and last watcher of a target are told to
// the others; a client another instance starts following is greeted to
// it.
func TestSessionRelaysToOtherInstances(t *testing.T) {
	g := newGate(t)
	relay := &fakeRelay{sent: make(chan conversation.RelayedFrame, 1<<12)}
	r := newRig(t, func(req fakellm.Request) fakellm.Reply {
		return g.reply("La la la. ", "La la la.")
	}, func(d *conversation.Deps) { d.WatchRelay = relay })
	t.Cleanup(g.open)

	// Opened, the session was greeted to the others' watchers.
	if fr := relay.next(t); fr.Kind != conversation.RelayGreet || fr.To != "" || fr.ClientUID != "client-1" || fr.ConfUID != "c1" {
		t.Fatalf("open relayed %+v", fr)
	}
	r.hub.Watchers().RemoteFollow(protocol.WatchTarget{ClientUID: "client-1"}, "inst-b")
	if fr := relay.next(t); fr.Kind != conversation.RelayGreet || fr.To != "inst-b" || fr.ClientUID != "client-1" || fr.ConfUID != "c1" {
		t.Fatalf("greeting relayed as %+v", fr)
	}
	r.hub.Watchers().RemoteFollow(protocol.WatchTarget{ClientUID: "not-here"}, "inst-b")

	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "sing"})
	var turn string
	for turn == "" {
		fr := relay.next(t)
		if fr.Kind == conversation.RelayGreet {
			t.Fatalf("greeted %+v for a client nobody newly follows", fr)
		}
		if fr.Kind == conversation.RelayFrame && fr.ClientUID == "client-1" && fr.ConfUID == "c1" {
			turn = fr.Turn
		}
	}
	r.dispatch(protocol.Inbound{Type: protocol.TypeInterruptSignal, Text: "La"})
	sawEnd, sawInterrupt := false, false
	for !sawEnd || !sawInterrupt {
		fr := relay.next(t)
		switch {
		case fr.Kind == conversation.RelayEnd:
			if fr.Turn != turn {
				t.Fatalf("end relayed for turn %q, want %q", fr.Turn, turn)
			}
			sawEnd = true
		case fr.Kind == conversation.RelayFrame && string(fr.Data) == `{"type":"control","text":"interrupt"}`:
			sawInterrupt = true
		}
	}

	w := newCtxWatcher()
	stop, err := r.hub.Watchers().Watch(protocol.WatchTarget{ClientUID: "desk"}, w, conversation.WatchOptions{ClientUID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	stop2, err := r.hub.Watchers().Watch(protocol.WatchTarget{ClientUID: "desk"}, newCtxWatcher(), conversation.WatchOptions{ClientUID: "w2"})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	stop2()
	relay.mu.Lock()
	defer relay.mu.Unlock()
	if want := []string{"client desk on 1", "client desk off 4"}; !slices.Equal(relay.follows, want) {
		t.Fatalf("follows told: %q, want %q", relay.follows, want)
	}
}

// leavingSender is a client that leaves as its chain-end is written: the
// write fails once the session has closed under it.
type leavingSender struct {
	*mock.Sender
	leave func()
}

func (s *leavingSender) SendWait(ctx context.Context, msg any) error {
	if m, ok := msg.(protocol.Text); ok && m.Text == protocol.ControlChainEnd {
		go s.leave()
		<-ctx.Done()
		return errors.New("connection closed")
	}
	return s.Sender.SendWait(ctx, msg)
}

// TestWatchersGetTheEndWhenTheClientLeaves: a client that leaves as its
// turn ends its chain takes nothing from its watchers: they get the
// chain-end, with a live context, and so do other instances' (no stop is
// relayed).
func TestWatchersGetTheEndWhenTheClientLeaves(t *testing.T) {
	relay := &fakeRelay{sent: make(chan conversation.RelayedFrame, 1<<12)}
	r := newRig(t, fakellm.Echo(0), func(d *conversation.Deps) { d.WatchRelay = relay })
	w := newCtxWatcher()
	stop, err := r.hub.Watchers().Watch(protocol.WatchTarget{ClientUID: "leaver"}, w, conversation.WatchOptions{ClientUID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	out := &leavingSender{Sender: mock.NewSender(1 << 10)}
	sess := r.hub.Open(r.ctx, out, conversation.SessionOptions{ClientUID: "leaver"})
	out.leave = sess.Close
	for range 4 { // greeted
		w.next(t)
	}
	if err := sess.Dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "bye now"}); err != nil {
		t.Fatal(err)
	}
	go func() { // the client plays the reply
		for f := range out.Frames {
			if f.Type == protocol.TypeBackendSynthComplete {
				played(sess)
			}
		}
	}()
	for {
		o := w.next(t)
		if o.data == `{"type":"control","text":"conversation-chain-end"}` {
			if o.ctx.Err() != nil {
				t.Fatal("the watcher got the chain-end with an ended context: it would drop it")
			}
			break
		}
	}
	for {
		fr := relay.next(t)
		if fr.Kind == conversation.RelayEnd {
			t.Fatalf("a stop was relayed for a turn that ended: %+v", fr)
		}
		if string(fr.Data) == `{"type":"control","text":"conversation-chain-end"}` {
			break
		}
	}
}
