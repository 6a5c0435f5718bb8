package conversation

import (
	"errors"
	"sync"
)

// Why a turn was stopped from outside its own session.
var (
	// errStopped: a stop request for its history (POST /api/chat/…/stop).
	errStopped = errors.New("stopped by a stop request")
	// errTakenOver: another session started a turn in the same history.
	errTakenOver = errors.New("another client started a turn in this history")
)

// stoppedFromOutside reports whether a turn ended for someone other than
// its own client: that client is then told (control: interrupt).
func stoppedFromOutside(cause error) bool {
	return errors.Is(cause, errStopped) || errors.Is(cause, errTakenOver)
}

// historyTurns knows the turn running in each history, whichever session
// (WebSocket or chat API) runs it. A history has at most one: a turn that
// starts in it stops the one running there and waits until that one has
// stored its records, so a history's records never interleave. A turn
// waits only for a turn that claimed the history before it, so waits
// cannot form a cycle.
type historyTurns struct {
	mu   sync.Mutex
	byID map[string]*turn
}

// claim makes t the running turn of history uid and returns the turn it
// displaced, if any; the caller stops that one.
func (h *historyTurns) claim(uid string, t *turn) *turn {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byID == nil {
		h.byID = map[string]*turn{}
	}
	prev := h.byID[uid]
	h.byID[uid] = t
	return prev
}

// release forgets t, if it is still the running turn of its history.
func (h *historyTurns) release(uid string, t *turn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byID[uid] == t {
		delete(h.byID, uid)
	}
}

func (h *historyTurns) running(uid string) *turn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byID[uid]
}

// StopHistory stops the turn running in history uid, whichever session
// runs it, and returns once it has stored what it had. It reports whether
// a turn was running.
func (h *Hub) StopHistory(uid string) bool {
	t := h.running.running(uid)
	if t == nil {
		return false
	}
	t.cancel(errStopped)
	<-t.done
	return true
}

// takeOver makes t the running turn of its history, stopping another
// session's turn there first.
func (h *Hub) takeOver(uid string, t *turn) {
	if prev := h.running.claim(uid, t); prev != nil && prev != t {
		prev.cancel(errTakenOver)
		<-prev.done
	}
}
