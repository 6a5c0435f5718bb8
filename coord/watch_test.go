package coord

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"koe/conversation"
	"koe/protocol"
	"koe/testkit/redistest"
)

// receiver is a fake hub: it records what the relay hands it.
type receiver struct {
	frames  chan conversation.RelayedFrame
	follows chan string // "client instance"
}

func newReceiver() *receiver {
	return &receiver{frames: make(chan conversation.RelayedFrame, 4096), follows: make(chan string, 64)}
}

func (r *receiver) Relayed(f conversation.RelayedFrame) { r.frames <- f }
func (r *receiver) RemoteFollow(t protocol.WatchTarget, instance string) {
	r.follows <- t.ClientUID + " " + instance
}

func (r *receiver) next(t testing.TB) conversation.RelayedFrame {
	t.Helper()
	select {
	case f := <-r.frames:
		return f
	case <-time.After(hangGuard):
		t.Fatalf("no relayed frame within %s", hangGuard)
	}
	return conversation.RelayedFrame{}
}

// relayInstance is one instance's relay, started with a fake hub.
func relayInstance(t testing.TB, srv *redistest.Server, name string, queue int) (*WatchRelay, *receiver, *logWatch) {
	t.Helper()
	w := newLogWatch(t, name)
	c := testConfig(srv.URL())
	if queue > 0 {
		c.RelayQueue = queue
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r, err := NewWatchRelay(ctx, c, RelayOptions{Logger: slog.New(w)})
	if err != nil {
		t.Fatal(err)
	}
	recv := newReceiver()
	r.Start(recv)
	t.Cleanup(func() { _ = r.Close() })
	return r, recv, w
}

// waitUntil waits for cond to hold, woken by each change of what other
// instances follow.
func waitUntil(t testing.TB, r *WatchRelay, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		ch := r.changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: not within %s", what, hangGuard)
		}
	}
}

// TestRelayCarriesFramesInOrder: a frame goes only to an instance whose
// watchers want it, with its kind, speaker and turn, in the order sent;
// an instance that no longer follows gets nothing more.
func TestRelayCarriesFramesInOrder(t *testing.T) {
	srv := redistest.Start(t)
	a, _, _ := relayInstance(t, srv, "A", 0)
	b, bRecv, _ := relayInstance(t, srv, "B", 0)
	c, cRecv, _ := relayInstance(t, srv, "C", 0)

	if a.Any() || a.Wanted("desk", "mao") {
		t.Fatal("nothing is watched yet, but A would relay")
	}
	b.Follow(protocol.WatchTarget{ConfUID: "mao"}, true, 1)
	c.Follow(protocol.WatchTarget{ClientUID: "desk"}, true, 1)
	waitUntil(t, a, "A learns what B and C follow", func() bool {
		return a.Wanted("other", "mao") && a.Wanted("desk", "")
	})
	if a.Wanted("other", "shiro") {
		t.Fatal("nobody watches shiro or client other")
	}

	// desk talking as mao is wanted by both; other talking as mao by B.
	const n = 200
	for i := range n {
		a.Send(conversation.RelayedFrame{Kind: conversation.RelayFrame, ClientUID: "desk", ConfUID: "mao", Turn: "t1", Data: []byte(strconv.Itoa(i))})
	}
	a.Send(conversation.RelayedFrame{Kind: conversation.RelayKoeFrame, ClientUID: "other", ConfUID: "mao", Data: []byte(`{"type":"token"}`)})
	a.Send(conversation.RelayedFrame{Kind: conversation.RelayFrame, ClientUID: "other", ConfUID: "shiro", Data: []byte("nobody")})
	a.Send(conversation.RelayedFrame{Kind: conversation.RelayEnd, ClientUID: "desk", ConfUID: "mao", Turn: "t1"})
	for name, recv := range map[string]*receiver{"B": bRecv, "C": cRecv} {
		for i := range n {
			f := recv.next(t)
			if f.Kind != conversation.RelayFrame || f.ClientUID != "desk" || f.ConfUID != "mao" || f.Turn != "t1" || string(f.Data) != strconv.Itoa(i) {
				t.Fatalf("%s: frame %d = %+v (%q)", name, i, f, f.Data)
			}
		}
	}
	if f := bRecv.next(t); f.Kind != conversation.RelayKoeFrame || f.ClientUID != "other" || string(f.Data) != `{"type":"token"}` {
		t.Fatalf("B: koe frame = %+v", f)
	}
	for name, recv := range map[string]*receiver{"B": bRecv, "C": cRecv} {
		if f := recv.next(t); f.Kind != conversation.RelayEnd || f.Turn != "t1" {
			t.Fatalf("%s: after the frames got %+v, want the turn's end (shiro's frame went nowhere)", name, f)
		}
	}

	// B stops following: A stops sending it anything.
	b.Follow(protocol.WatchTarget{ConfUID: "mao"}, false, 2)
	waitUntil(t, a, "A learns B no longer follows", func() bool { return !a.Wanted("other", "mao") })
	// A stale news (seq 1 after 2) changes nothing.
	b.Follow(protocol.WatchTarget{ConfUID: "mao"}, true, 1)
	a.Send(conversation.RelayedFrame{Kind: conversation.RelayFrame, ClientUID: "other", ConfUID: "mao", Data: []byte("late")})
	a.Send(conversation.RelayedFrame{Kind: conversation.RelayFrame, ClientUID: "desk", ConfUID: "mao", Data: []byte("marker")})
	if f := cRecv.next(t); string(f.Data) != "marker" {
		t.Fatalf("C got %q, want the marker", f.Data)
	}
	select {
	case f := <-bRecv.frames:
		t.Fatalf("B no longer follows mao but got %+v (%q)", f, f.Data)
	default:
	}
}

// TestRelayGreetsNewFollowers: an instance learns at once when another
// instance's watchers start following one of its clients (so it can greet
// them), including when it starts after them.
func TestRelayGreetsNewFollowers(t *testing.T) {
	srv := redistest.Start(t)
	a, aRecv, _ := relayInstance(t, srv, "A", 0)
	b, bRecv, _ := relayInstance(t, srv, "B", 0)
	b.Follow(protocol.WatchTarget{ClientUID: "desk"}, true, 1)
	select {
	case got := <-aRecv.follows:
		if got != "desk "+b.Instance() {
			t.Fatalf("A told %q, want desk followed by B", got)
		}
	case <-time.After(hangGuard):
		t.Fatal("A was not told that B follows desk")
	}
	// A greeting addressed to B goes to B only, even to a client B does
	// not follow.
	a.Send(conversation.RelayedFrame{Kind: conversation.RelayGreet, ClientUID: "desk", ConfUID: "mao", To: b.Instance()})
	if f := bRecv.next(t); f.Kind != conversation.RelayGreet || f.ClientUID != "desk" || f.ConfUID != "mao" {
		t.Fatalf("B got %+v, want desk's greeting", f)
	}

	// An instance that starts later asks, and hears of desk too.
	_, cRecv, _ := relayInstance(t, srv, "C", 0)
	select {
	case got := <-cRecv.follows:
		if got != "desk "+b.Instance() {
			t.Fatalf("C told %q", got)
		}
	case <-time.After(hangGuard):
		t.Fatal("C, started after B, was not told that B follows desk")
	}
}

// TestRelayForgetsGoneInstances: an instance that closes says so; one that
// dies without a word is forgotten after coord.lease.
func TestRelayForgetsGoneInstances(t *testing.T) {
	srv := redistest.Start(t)
	a, _, _ := relayInstance(t, srv, "A", 0)
	b, _, _ := relayInstance(t, srv, "B", 0)
	c, _, _ := relayInstance(t, srv, "C", 0)
	b.Follow(protocol.WatchTarget{ConfUID: "mao"}, true, 1)
	c.Follow(protocol.WatchTarget{ConfUID: "shiro"}, true, 1)
	waitUntil(t, a, "A learns what B and C follow", func() bool { return a.Wanted("", "mao") && a.Wanted("", "shiro") })

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, a, "A forgets B, which closed", func() bool { return !a.Wanted("", "mao") })

	// C dies: it stops saying anything, without goodbye.
	died := time.Now()
	c.cancel()
	c.wg.Wait()
	waitUntil(t, a, "A forgets C, which died", func() bool { return !a.Wanted("", "shiro") })
	if took := time.Since(died); took < testLease/2 {
		t.Fatalf("C forgotten %s after it died, before its news could expire (%s)", took, testLease)
	}
	if a.Any() {
		t.Fatal("A still thinks someone watches")
	}
}

// TestRelayAfterRedisRestart: after Redis comes back (with nothing kept),
// the instances say again what they follow and frames flow again.
func TestRelayAfterRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	a, _, aLog := relayInstance(t, srv, "A", 0)
	b, bRecv, bLog := relayInstance(t, srv, "B", 0)
	b.Follow(protocol.WatchTarget{ConfUID: "mao"}, true, 1)
	waitUntil(t, a, "A learns what B follows", func() bool { return a.Wanted("", "mao") })

	srv.Stop()
	srv.Start()
	aLog.waitFor("watch relay subscribed again", 1)
	bLog.waitFor("watch relay subscribed again", 1)
	// Until then A may have forgotten B (its news could not come); B said
	// it again on subscribing.
	waitUntil(t, a, "A knows B follows mao after the restart", func() bool { return a.Wanted("", "mao") })
	for i := range 3 {
		a.Send(conversation.RelayedFrame{Kind: conversation.RelayFrame, ConfUID: "mao", Data: []byte(fmt.Sprint(i))})
	}
	for i := range 3 {
		if f := bRecv.next(t); string(f.Data) != fmt.Sprint(i) {
			t.Fatalf("after the restart B got %q, want %d", f.Data, i)
		}
	}
}

// TestRelayQueueFull: a sender never waits; past coord.relay_queue frames
// are dropped and counted.
func TestRelayQueueFull(t *testing.T) {
	srv := redistest.Start(t)
	w := newLogWatch(t, "A")
	c := testConfig(srv.URL())
	c.RelayQueue = 4
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	dropped := 0
	a, err := NewWatchRelay(ctx, c, RelayOptions{Logger: slog.New(w), Dropped: func() { dropped++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Not started: nothing drains the queue. Someone follows mao.
	a.remote[kindConf]["mao"] = map[string]time.Time{"b": time.Now().Add(time.Hour)}
	a.remoteCount.Add(1)
	for range 10 {
		a.Send(conversation.RelayedFrame{Kind: conversation.RelayFrame, ConfUID: "mao", Data: []byte("x")})
	}
	if dropped != 6 || a.drops.Load() != 6 || len(a.queue) != 4 {
		t.Fatalf("dropped %d (counted %d), queued %d; want 6 dropped past a queue of 4", dropped, a.drops.Load(), len(a.queue))
	}
	w.waitFor("watch relay queue full (coord.relay_queue): frames for other instances' watchers dropped", 1)
}

// BenchmarkRelayWanted is the cost a session pays per frame when other
// instances watch something else.
func BenchmarkRelayWanted(b *testing.B) {
	r := &WatchRelay{remote: map[string]map[string]map[string]time.Time{kindClient: {}, kindConf: {"shiro": {"x": {}}}}}
	r.remoteCount.Add(1)
	b.ReportAllocs()
	for b.Loop() {
		if r.Wanted("desk", "mao") {
			b.Fatal("wanted")
		}
	}
}
