package coord

import (
	"context"
	"testing"

	"koe/conversation"
	"koe/testkit/redistest"
)

// Held tells whether a turn holds a history, whichever instance runs it.
func TestHeldAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := instance(t, srv, "A")
	b, _ := instance(t, srv, "B")
	testHeld(t, a, b)
}

func TestLocalCoordinatorHeld(t *testing.T) {
	c := conversation.NewLocalCoordinator()
	testHeld(t, c, c)
}

func testHeld(t *testing.T, a, b conversation.Coordinator) {
	t.Helper()
	held := func(c conversation.Coordinator, history string) bool {
		t.Helper()
		h, err := c.Held(context.Background(), history)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if held(b, "h-held") {
		t.Fatal("a history nobody claimed is held")
	}
	lease := claim(t, a, "h-held", "run-1", newTurn())
	if !held(b, "h-held") || !held(a, "h-held") {
		t.Fatal("a claimed history is not held")
	}
	if held(b, "h-other") {
		t.Fatal("another history is held")
	}
	lease.Release()
	if held(b, "h-held") {
		t.Fatal("a released history is still held")
	}
}
