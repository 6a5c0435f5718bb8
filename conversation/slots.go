package conversation

import (
	"context"
	"sync"
)

// workSlots bound CPU-heavy work running at once across all sessions: speech
// synthesis and speech recognition each have their own. Local engines are
// CPU-bound: hundreds of espeak-ng or pocketsphinx processes sharing two
// cores all finish late, while the same work queued finishes early on
// average. Waiters marked urgent (a turn's first piece: it decides when its
// user hears anything) are served first, then everyone in arrival order.
type workSlots struct {
	mu    sync.Mutex
	free  int
	first []chan struct{} // urgent waiters, oldest first
	later []chan struct{} // other waiters, oldest first
}

// newWorkSlots allows n holders at once (at least one).
func newWorkSlots(n int) *workSlots {
	return &workSlots{free: max(n, 1)}
}

// acquire waits for a slot; first marks an urgent waiter.
func (l *workSlots) acquire(ctx context.Context, first bool) error {
	l.mu.Lock()
	if l.free > 0 && len(l.first) == 0 && (first || len(l.later) == 0) {
		l.free--
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if first {
		l.first = append(l.first, ch)
	} else {
		l.later = append(l.later, ch)
	}
	l.mu.Unlock()

	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.remove(ch) {
			return ctx.Err()
		}
		// Granted while we gave up: pass the slot on.
		l.releaseLocked()
		return ctx.Err()
	}
}

// release returns a slot, handing it to the next waiter if any.
func (l *workSlots) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked()
}

func (l *workSlots) releaseLocked() {
	for _, q := range []*[]chan struct{}{&l.first, &l.later} {
		if len(*q) > 0 {
			ch := (*q)[0]
			*q = (*q)[1:]
			close(ch)
			return
		}
	}
	l.free++
}

// remove drops a waiter that gave up; false means it was already granted.
func (l *workSlots) remove(ch chan struct{}) bool {
	for _, q := range []*[]chan struct{}{&l.first, &l.later} {
		for i, c := range *q {
			if c == ch {
				*q = append((*q)[:i], (*q)[i+1:]...)
				return true
			}
		}
	}
	return false
}
