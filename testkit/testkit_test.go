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
