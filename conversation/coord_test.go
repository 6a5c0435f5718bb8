package conversation_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"koe"
	"koe/agent"
	"koe/conversation"
	"koe/coord"
	"koe/llm"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/mock"
	"koe/testkit/redistest"
)

// Two instances here are two hubs that share one store (as instances share
// a database) and coordinate through one redis-server, each with its own
// connection to it.

// withCoordinator coordinates the rig's hub through c.
func withCoordinator(c conversation.Coordinator) rigOption {
	return func(d *conversation.Deps) { d.Coordinator = c }
}

func redisCoordinator(t *testing.T, srv *redistest.Server) *coord.RedisCoordinator {
	t.Helper()
	return redisCoordinatorWait(t, srv, hangGuard)
}

func redisCoordinatorWait(t *testing.T, srv *redistest.Server, wait time.Duration) *coord.RedisCoordinator {
	t.Helper()
	cfg := coord.DefaultConfig()
	cfg.Backend, cfg.RedisURL, cfg.Lease, cfg.Wait = coord.Redis, srv.URL(), time.Second, wait
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c, err := coord.NewRedis(ctx, cfg, koetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// instanceB is a second hub on the rig's store and LLM, coordinated by c,
// with one session.
type instanceB struct {
	hub  *conversation.Hub
	sess *conversation.Session
	out  *mock.Sender
}

func newInstanceB(t *testing.T, r *rig, c conversation.Coordinator) *instanceB {
	t.Helper()
	deps := conversation.Deps{
		Config:      conversation.DefaultConfig(),
		Store:       r.store,
		Characters:  r.chars,
		NewLLM:      func(c agent.Config) agent.LLM { return llm.New(c, nil) },
		Coordinator: c,
		Logger:      koetest.Logger(t).With("instance", "B"),
	}
	deps.Config.PlaybackTimeout = hangGuard
	b := &instanceB{hub: conversation.NewHub(deps), out: mock.NewSender(1 << 14)}
	b.sess = b.hub.Open(r.ctx, b.out, conversation.SessionOptions{ClientUID: "client-b", KoeEvents: true, Logger: deps.Logger})
	t.Cleanup(func() {
		b.sess.Close()
		b.hub.Close()
	})
	return b
}

func (b *instanceB) until(t *testing.T, typ, text string) []mock.Frame {
	t.Helper()
	var got []mock.Frame
	for {
		select {
		case f := <-b.out.Frames:
			got = append(got, f)
			if f.Type == protocol.TypeError {
				t.Fatalf("instance B: error frame %s", f.JSON)
			}
			if f.Type == typ && (text == "" || f.Text == text) {
				return got
			}
		case <-time.After(hangGuard):
			t.Fatalf("instance B: no %s %s within %s; sent so far: %v", typ, text, hangGuard, frameTypes(b.out.All()))
		}
	}
}

// A turn on instance B in a history whose turn instance A runs takes it
// over: A's turn stops (its client is told), stores what it had, and only
// then does B's turn store anything.
func TestTakeOverAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	var g *gate
	var calls atomic.Int32
	r := newRig(t, func(fakellm.Request) fakellm.Reply {
		switch calls.Add(1) {
		case 1:
			return fakellm.Reply{Tokens: fakellm.Words("Done.")}
		case 2:
			return g.reply("Partial", " answer", " here.")
		}
		return fakellm.Reply{Tokens: fakellm.Words("Second.")}
	}, withCoordinator(redisCoordinator(t, srv)))
	g = newGate(t)
	b := newInstanceB(t, r, redisCoordinator(t, srv))

	r.turn("zero")
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "first"})
	r.until(protocol.TypeToken, "")
	uid := r.sess.Info().HistoryUID
	if err := b.sess.Dispatch(protocol.Inbound{Type: protocol.TypeFetchAndSetHistory, HistoryUID: uid}); err != nil {
		t.Fatal(err)
	}
	if err := b.sess.Dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "second"}); err != nil {
		t.Fatal(err)
	}
	r.until(protocol.TypeControl, protocol.ControlInterrupt)
	b.until(t, protocol.TypeBackendSynthComplete, "")
	played(b.sess)
	b.until(t, protocol.TypeControl, protocol.ControlChainEnd)

	var got []string
	for _, rec := range r.records() {
		if rec.Role != koe.RoleHuman && rec.Role != koe.RoleAI {
			continue
		}
		s := string(rec.Role) + ":" + rec.Content
		if rec.Interrupted {
			s += " [interrupted]"
		}
		got = append(got, s)
	}
	want := []string{"human:zero", "ai:Done.", "human:first", "ai:Partial [interrupted]", "human:second", "ai:Second."}
	if !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
}

// A stop requested on instance B stops the turn instance A runs, and
// returns once that turn has stored what it had.
func TestStopAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	var g *gate
	r := newRig(t, func(fakellm.Request) fakellm.Reply { return g.reply("Partial", " answer", " here.") },
		withCoordinator(redisCoordinator(t, srv)))
	g = newGate(t)
	b := newInstanceB(t, r, redisCoordinator(t, srv))

	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "talk"})
	r.until(protocol.TypeToken, "")
	uid := r.sess.Info().HistoryUID
	start := time.Now()
	stopped, err := b.hub.StopHistory(context.Background(), uid)
	took := time.Since(start)
	if err != nil || !stopped {
		t.Fatalf("stop on instance B = %v, %v; want true, nil", stopped, err)
	}
	t.Logf("stop on B → A's turn stopped and stored: %s", took.Round(time.Microsecond))
	if ai := aiRecords(r.records()); !slices.Equal(ai, []string{"Partial [interrupted]"}) {
		t.Fatalf("after the stop returned, the history's replies are %q", ai)
	}
	r.until(protocol.TypeControl, protocol.ControlInterrupt)
	if stopped, err := b.hub.StopHistory(context.Background(), uid); err != nil || stopped {
		t.Fatalf("second stop = %v, %v; want false, nil", stopped, err)
	}
}

// With Redis away for longer than coord_wait, a turn cannot have its
// history: it fails with an error that says why, and stores nothing; once
// Redis is back, turns work again.
func TestTurnWithRedisAway(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t, fakellm.Echo(0), withCoordinator(redisCoordinatorWait(t, srv, time.Second)))
	srv.Stop()
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "hello"})
	var failed bool
	for _, f := range r.until(protocol.TypeControl, protocol.ControlChainEnd) {
		if f.Type == protocol.TypeError {
			if !strings.Contains(string(f.JSON), "could not start the turn") {
				t.Fatalf("error frame %s", f.JSON)
			}
			failed = true
		}
	}
	if !failed {
		t.Fatal("no error frame for a turn that could not have its history")
	}
	if uid := r.sess.Info().HistoryUID; uid != "" {
		t.Fatalf("the session points at history %q, which was never stored", uid)
	}
	srv.Start()
	r.turn("again")
	var got []string
	for _, rec := range r.records() {
		if rec.Role == koe.RoleHuman {
			got = append(got, rec.Content)
		}
	}
	if !slices.Equal(got, []string{"again"}) {
		t.Fatalf("human messages stored: %q", got)
	}
}
