package conversation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"koe/testkit"
)

// waitQueued waits until n waiters are queued.
func waitQueued(t *testing.T, l *workSlots, n int) {
	t.Helper()
	testkit.Await(t, fmt.Sprintf("%d waiters queued", n), func() (int, bool) {
		l.mu.Lock()
		got := len(l.first) + len(l.later)
		l.mu.Unlock()
		return got, got == n
	})
}

func TestSlotsServeFirstPiecesFirst(t *testing.T) {
	l := newWorkSlots(1)
	ctx := context.Background()
	if err := l.acquire(ctx, false); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	start := func(name string, first bool, queued int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.acquire(ctx, first); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			l.release()
		}()
		waitQueued(t, l, queued)
	}
	start("later-1", false, 1)
	start("later-2", false, 2)
	start("first-1", true, 3)
	start("first-2", true, 4)
	l.release()
	wg.Wait()
	want := []string{"first-1", "first-2", "later-1", "later-2"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("served %v, want %v", order, want)
		}
	}
	// Everything released: the slot is free again, once.
	if err := l.acquire(ctx, false); err != nil {
		t.Fatal(err)
	}
	if l.free != 0 {
		t.Fatalf("free = %d after re-acquiring the only slot", l.free)
	}
}

func TestSlotsCancelledWaiterLeavesNoTrace(t *testing.T) {
	l := newWorkSlots(1)
	if err := l.acquire(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.acquire(ctx, false) }()
	waitQueued(t, l, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire = %v", err)
	}
	waitQueued(t, l, 0)
	l.release()
	if l.free != 1 {
		t.Fatalf("free = %d, want 1", l.free)
	}
}

// A newcomer never overtakes a queued first piece, even with a slot free
// for a moment between a release and the waiter's wake-up.
func TestSlotsNoOvertaking(t *testing.T) {
	l := newWorkSlots(1)
	ctx := context.Background()
	_ = l.acquire(ctx, false)
	got := make(chan struct{})
	go func() { _ = l.acquire(ctx, true); close(got) }()
	waitQueued(t, l, 1)
	l.release() // hands the slot straight to the waiter
	<-got
	l.mu.Lock()
	free := l.free
	l.mu.Unlock()
	if free != 0 {
		t.Fatalf("slot free after hand-over: %d", free)
	}
}
