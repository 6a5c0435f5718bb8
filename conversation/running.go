package conversation

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"koe"
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

// Coordinator makes a history have at most one running turn, among the
// sessions of this process or, shared through a service, among every koe
// instance that serves the same histories. A turn that starts in a
// history stops the one running there and waits until that one has
// stored its records and let the history go, so a history's records
// never interleave: the newer turn wins.
//
// The default, LocalCoordinator, coordinates the sessions of one process;
// package coord has one shared through Redis.
type Coordinator interface {
	// Claim makes turn (an id unique to it) the running turn of history.
	// A turn running there, on any instance, is asked to stop (as taken
	// over), and Claim returns once it has released the history. stop is
	// called, at most once and from any goroutine, when the claiming
	// turn must stop: takenOver when a newer turn claims the history,
	// otherwise because a stop was requested. A claim overtaken by a
	// newer one while it waits may instead fail with ErrOvertaken: the
	// turn then stores nothing. Claim fails otherwise only when the
	// history could not be had (the wait's bound, an unreachable
	// service); the turn then does not run.
	Claim(ctx context.Context, history, turn string, stop func(takenOver bool)) (Lease, error)
	// Stop asks the turn running in history, on whichever instance, to
	// stop, and returns once it has released the history. It reports
	// whether a turn was running.
	Stop(ctx context.Context, history string) (bool, error)
	// Held reports whether a turn holds history, on any instance: a
	// file is not attached in the middle of a reply.
	Held(ctx context.Context, history string) (bool, error)
}

// Lease is a turn's hold on its history; the turn releases it when it has
// stored its records.
type Lease interface {
	// Release lets the history go; calling it again does nothing.
	Release()
}

// LocalCoordinator coordinates the turns of one process (the default).
// A turn waits only for a turn that claimed the history before it, so
// waits cannot form a cycle.
type LocalCoordinator struct {
	mu   sync.Mutex
	byID map[string]*localLease
}

// NewLocalCoordinator returns a coordinator for the turns of this process.
func NewLocalCoordinator() *LocalCoordinator {
	return &LocalCoordinator{byID: map[string]*localLease{}}
}

type localLease struct {
	c        *LocalCoordinator
	history  string
	stop     func(takenOver bool)
	once     sync.Once
	released chan struct{}
}

// Claim makes the claimant the holder of history at once and waits for
// the one it displaced, if any, to release it.
func (c *LocalCoordinator) Claim(_ context.Context, history, _ string, stop func(takenOver bool)) (Lease, error) {
	l := &localLease{c: c, history: history, stop: stop, released: make(chan struct{})}
	c.mu.Lock()
	prev := c.byID[history]
	c.byID[history] = l
	c.mu.Unlock()
	if prev != nil {
		prev.stop(true)
		<-prev.released
	}
	return l, nil
}

// Stop stops the holder of history and waits until it released it.
func (c *LocalCoordinator) Stop(_ context.Context, history string) (bool, error) {
	c.mu.Lock()
	l := c.byID[history]
	c.mu.Unlock()
	if l == nil {
		return false, nil
	}
	l.stop(false)
	<-l.released
	return true, nil
}

// Held reports whether a turn of this process holds history.
func (c *LocalCoordinator) Held(_ context.Context, history string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[history] != nil, nil
}

func (l *localLease) Release() {
	l.once.Do(func() {
		l.c.mu.Lock()
		if l.c.byID[l.history] == l {
			delete(l.c.byID, l.history)
		}
		l.c.mu.Unlock()
		close(l.released)
	})
}

// historyTurns knows the turn of this process running in each history,
// for what only this process can see of it (whether it is finishing).
type historyTurns struct {
	mu   sync.Mutex
	byID map[string]*turn
}

// claim makes t the running turn of history uid here.
func (h *historyTurns) claim(uid string, t *turn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byID == nil {
		h.byID = map[string]*turn{}
	}
	h.byID[uid] = t
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
// (and, with a shared coordinator, whichever instance) runs it, and
// returns once it has stored what it had. It reports whether a turn was
// running.
func (h *Hub) StopHistory(ctx context.Context, uid string) (bool, error) {
	stopped, err := h.coord.Stop(ctx, uid)
	if err != nil {
		return false, fmt.Errorf("stop the turn in history %s: %w", uid, err)
	}
	return stopped, nil
}

// ErrOvertaken is a Coordinator's answer to a claim that a newer claim of
// the same history overtook while it waited: the turn is taken over
// before it began.
var ErrOvertaken = errors.New("a newer turn claimed the history while this one waited for it")

// noClaim: the history could not be had for the turn, because of cause.
func noClaim(cause error) error {
	return &koe.Error{Kind: koe.Unavailable, Err: &hiddenCause{
		msg:   "koe could not start the turn: another turn in this history did not end in time, or the coordination service is unreachable; the reason is in its log",
		cause: cause,
	}}
}

// takeOver makes t the running turn of its history, stopping the turn
// running there first (in any session or instance).
func (h *Hub) takeOver(uid string, t *turn) (Lease, error) {
	// Seen here at once: a file attached meanwhile waits for this turn.
	h.running.claim(uid, t)
	lease, err := h.coord.Claim(context.WithoutCancel(t.ctx), uid, t.id, func(takenOver bool) {
		if takenOver {
			t.cancel(errTakenOver)
		} else {
			t.cancel(errStopped)
		}
	})
	if errors.Is(err, ErrOvertaken) {
		h.running.release(uid, t)
		t.cancel(errTakenOver)
		return nil, err
	}
	if err != nil {
		h.running.release(uid, t)
		h.log.Error("could not claim the history for a turn", "history_uid", uid, "run_id", t.id, "err", err)
		return nil, noClaim(err)
	}
	return lease, nil
}

// releaseHistory lets the history go at the end of t: the coordinator's
// lease first, so that a turn it shows as holding the history is, in
// this process, still seen here (see turnDone).
func (h *Hub) releaseHistory(uid string, t *turn, lease Lease) {
	if lease != nil {
		lease.Release()
	}
	h.running.release(uid, t)
}
