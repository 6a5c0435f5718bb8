package testkit

import (
	"sync/atomic"
	"testing"
)

func TestEventually(t *testing.T) {
	var n atomic.Int32
	Eventually(t, "the counter reaches 5", func() bool { return n.Add(1) >= 5 })
	if got := n.Load(); got != 5 {
		t.Fatalf("asked %d times, want 5", got)
	}
}

func TestAwait(t *testing.T) {
	n := 0
	got := Await(t, "the counter reaches 3", func() (int, bool) { n++; return n * 10, n >= 3 })
	if got != 30 || n != 3 {
		t.Fatalf("Await = %d after %d asks, want 30 after 3", got, n)
	}
}
