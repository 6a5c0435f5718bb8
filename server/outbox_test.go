package server

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

var errTestClosed = errors.New("closed")

// testOutbox is an outbox whose writer is woken into a counter.
func testOutbox(frames, bytes int, patience time.Duration) (*outbox, *int) {
	wakes := 0
	o := newOutbox(Config{SendQueueSize: frames, WatcherQueueBytes: bytes, WriteTimeout: patience}, errTestClosed, func() { wakes++ })
	return o, &wakes
}

func dataFrame(s string) frame { return frame{ctx: context.Background(), data: []byte(s)} }

// The writer is woken when work arrives for it idle, once, and is idle
// again only when it finds nothing.
func TestOutboxWakesAnIdleWriterOnce(t *testing.T) {
	o, wakes := testOutbox(8, 1<<20, time.Minute)
	ctx := context.Background()
	for _, s := range []string{"a", "b"} {
		if err := o.send(ctx, dataFrame(s)); err != nil {
			t.Fatal(err)
		}
	}
	if *wakes != 1 {
		t.Fatalf("writer woken %d times for two frames, want 1", *wakes)
	}
	for _, want := range []string{"a", "b"} {
		f, w := o.next()
		if w != workFrame || string(f.data) != want {
			t.Fatalf("next = %q, %v; want %q", f.data, w, want)
		}
	}
	if _, w := o.next(); w != workNone {
		t.Fatalf("next on an empty outbox = %v, want workNone", w)
	}
	if !o.poke() {
		t.Fatal("poke refused on an open outbox")
	}
	if *wakes != 2 {
		t.Fatalf("an idle writer was not woken for a ping (%d wakes)", *wakes)
	}
	_ = o.send(ctx, dataFrame("c"))
	// The ping goes before the frame queued after it.
	if _, w := o.next(); w != workDue {
		t.Fatalf("next = %v, want the ping first", w)
	}
	if f, w := o.next(); w != workFrame || string(f.data) != "c" {
		t.Fatalf("next = %q, %v; want c", f.data, w)
	}
}

// A sender waits for room while the queue is full and goes on once the
// writer takes a frame; one whose queue stays full past the patience is
// told the client is slow.
func TestOutboxSenderWaitsThenGivesUp(t *testing.T) {
	ctx := context.Background()
	o, _ := testOutbox(2, 1<<20, time.Minute)
	_ = o.send(ctx, dataFrame("1"))
	_ = o.send(ctx, dataFrame("2"))
	sent := make(chan error, 1)
	go func() { sent <- o.send(ctx, dataFrame("3")) }()
	if f, w := o.next(); w != workFrame || string(f.data) != "1" {
		t.Fatalf("next = %q, %v", f.data, w)
	}
	if err := <-sent; err != nil {
		t.Fatalf("a sender given room failed: %v", err)
	}
	if n := o.len(); n != 2 {
		t.Fatalf("queued %d, want 2", n)
	}

	// The give-up comes after exactly write_timeout: in a synctest
	// bubble, time passes only when every goroutine waits.
	synctest.Test(t, func(t *testing.T) {
		const patience = 10 * time.Second
		impatient, _ := testOutbox(1, 1<<20, patience)
		_ = impatient.send(ctx, dataFrame("1"))
		start := time.Now()
		if err := impatient.send(ctx, dataFrame("2")); !errors.Is(err, errSlowClient) {
			t.Fatalf("send into a queue that stays full = %v, want errSlowClient", err)
		}
		if waited := time.Since(start); waited != patience {
			t.Fatalf("gave up after %s, want write_timeout (%s)", waited, patience)
		}
	})

	// A sender waiting for room gives up when its own context ends, or
	// when the outbox closes.
	cctx, cancel := context.WithCancel(ctx)
	go func() { sent <- o.send(cctx, dataFrame("4")) }()
	cancel()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("send with an ended context = %v", err)
	}
	go func() { sent <- o.send(ctx, dataFrame("5")) }()
	o.close()
	if err := <-sent; !errors.Is(err, errTestClosed) {
		t.Fatalf("send into a closing outbox = %v, want its closed error", err)
	}
}

// Offers never wait: they are bounded by bytes, the first is always
// taken, and they do not count against the senders' frames.
func TestOutboxOffersAreBoundedByBytes(t *testing.T) {
	o, _ := testOutbox(8, 10, time.Minute)
	if _, ok := o.offer(dataFrame("a frame larger than the bound")); !ok {
		t.Fatal("the first offer was refused")
	}
	if queued, ok := o.offer(dataFrame("x")); ok || queued != len("a frame larger than the bound") {
		t.Fatalf("offer past the bound = %d, %v; want refused with the bytes queued", queued, ok)
	}
	o.rest()
	for range 10 {
		if _, ok := o.offer(dataFrame("x")); !ok {
			t.Fatal("an offer within the bound was refused")
		}
	}
	if _, ok := o.offer(dataFrame("x")); ok {
		t.Fatal("the eleventh byte was taken")
	}
	o.close()
	if _, ok := o.offer(dataFrame("after")); !ok {
		t.Fatal("a closed outbox refused an offer: its watcher would be dropped twice")
	}
}

// The last frame goes in past the bound and comes out with the batch
// before it; nothing is taken after it.
func TestOutboxLastFrame(t *testing.T) {
	ctx := context.Background()
	o, _ := testOutbox(1, 1<<20, time.Millisecond)
	_ = o.send(ctx, dataFrame("1"))
	o.end(dataFrame("end"))
	if err := o.send(ctx, dataFrame("late")); !errors.Is(err, errTestClosed) {
		t.Fatalf("send after the last frame = %v", err)
	}
	frames, last, closed := o.takeAll()
	if len(frames) != 2 || string(frames[1].data) != "end" || !last || closed {
		t.Fatalf("takeAll = %d frames, last %v, closed %v", len(frames), last, closed)
	}
}

// Closing hands back what was never written, once.
func TestOutboxClose(t *testing.T) {
	ctx := context.Background()
	o, wakes := testOutbox(8, 1<<20, time.Minute)
	_ = o.send(ctx, dataFrame("1"))
	o.next()
	o.next() // idle
	_ = o.send(ctx, dataFrame("2"))
	before := *wakes
	if !o.close() || o.close() {
		t.Fatal("close did not report the first call alone")
	}
	if *wakes != before {
		t.Fatal("a busy writer was woken again by close")
	}
	if _, w := o.next(); w != workClosed {
		t.Fatalf("next after close = %v", w)
	}
	if _, _, closed := o.takeAll(); !closed {
		t.Fatal("takeAll after close does not say so")
	}
	if rest := o.rest(); len(rest) != 1 || string(rest[0].data) != "2" {
		t.Fatalf("rest = %d frames", len(rest))
	}
	if o.poke() {
		t.Fatal("a closed outbox took a ping")
	}
}
