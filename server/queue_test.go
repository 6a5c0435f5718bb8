package server

import (
	"strconv"
	"testing"
)

func queuedFrame(i int) frame { return frame{data: []byte(strconv.Itoa(i))} }

// The queue is first in, first out across growth and wrap-around, and a
// drained queue lets a burst's ring go.
func TestFrameQueueOrder(t *testing.T) {
	var q frameQueue
	next, out := 0, 0
	pop := func() {
		t.Helper()
		f, ok := q.pop()
		if !ok || string(f.data) != strconv.Itoa(out) {
			t.Fatalf("pop = %q, %v; want %d", f.data, ok, out)
		}
		out++
	}
	// Push and pop at different paces so that the ring wraps and grows
	// with frames on both sides of its end.
	for round := 0; round < 50; round++ {
		for range round%7 + 1 {
			q.push(queuedFrame(next))
			next++
		}
		for range round % 5 {
			if q.len() > 0 {
				pop()
			}
		}
		if q.len() != next-out {
			t.Fatalf("len = %d, want %d", q.len(), next-out)
		}
	}
	if cap(q.ring) <= keptQueueCap {
		t.Fatalf("the test did not grow the ring past %d (cap %d)", keptQueueCap, cap(q.ring))
	}
	for q.len() > 0 {
		pop()
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop from an empty queue succeeded")
	}
	if q.ring != nil {
		t.Errorf("a drained queue keeps a ring of %d frames", len(q.ring))
	}

	for i := range 3 {
		q.push(queuedFrame(i))
	}
	got := q.drain()
	if len(got) != 3 || string(got[0].data) != "0" || string(got[2].data) != "2" || q.len() != 0 {
		t.Fatalf("drain = %d frames, len after %d", len(got), q.len())
	}
}
