package conversation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// turns is a session's turn state machine: at most one turn runs. Starting
// a turn first stops the one before, and stopping waits until the stopped
// turn has stored what it had, so records keep their order.
type turns struct {
	mu  sync.Mutex
	cur *turn
	// draining: koe is restarting, and no turn starts any more (see
	// drain); idle is called once the running turn has ended.
	draining bool
	idle     func()
}

// start stops the running turn, if any, and runs run in a new turn under
// parent. run owns the turn's goroutine; when it returns the turn is over.
// Once the session drains it starts nothing and returns nil; the running
// turn is then left alone, since the new input is refused, not answered.
func (ts *turns) start(parent context.Context, run func(*turn)) *turn {
	if ts.isDraining() {
		return nil
	}
	ts.stop(errSuperseded)
	t := newTurn(parent)
	ts.mu.Lock()
	// Asked to drain while the turn before was stopping: that one's end
	// has told the drain the session is idle, so this one must not run.
	if ts.draining {
		ts.mu.Unlock()
		return nil
	}
	ts.cur = t
	ts.mu.Unlock()
	go func() {
		defer ts.finish(t)
		run(t)
	}()
	return t
}

func (ts *turns) isDraining() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.draining
}

// drain makes start refuse every turn from now on. It reports whether a
// turn is running; if one is, idle is called (once, from the turn's
// goroutine) when it has ended and stored its records.
func (ts *turns) drain(idle func()) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.draining = true
	if ts.cur == nil {
		return false
	}
	ts.idle = idle
	return true
}

// running returns the running turn, or nil.
func (ts *turns) running() *turn {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.cur
}

// stop cancels the running turn with cause and waits until it has finished
// (and stored its records). It reports whether a turn was running.
func (ts *turns) stop(cause error) bool {
	t := ts.running()
	if t == nil {
		return false
	}
	t.cancel(cause)
	t.hurryUp()
	<-t.done
	return true
}

// stopTurn cancels t with cause, if it has not ended, and waits until it
// has stored its records. Unlike stop it never touches a later turn.
func (ts *turns) stopTurn(t *turn, cause error) {
	select {
	case <-t.done:
		return
	default:
	}
	t.cancel(cause)
	<-t.done
}

func (ts *turns) finish(t *turn) {
	var idle func()
	ts.mu.Lock()
	if ts.cur == t {
		ts.cur = nil
		idle, ts.idle = ts.idle, nil
	}
	ts.mu.Unlock()
	t.cancel(nil)
	close(t.done)
	if idle != nil {
		idle()
	}
}

// turn is one user input and everything koe sends in answer to it.
type turn struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	// id is the turn's run_id in koe's message events.
	id string
	// err is why the turn failed (the LLM, the history), for the chat
	// API; written by the turn's goroutine before done is closed.
	err error

	awaitingPlayback atomic.Bool
	playback         chan struct{}

	// hurry is closed when a stop waits for the turn: a turn waiting
	// for its client's word on what was heard (BargeIn) stops waiting.
	hurry     chan struct{}
	hurryOnce sync.Once

	// replying is set once the turn has its input (a recording is
	// transcribed): from then on, speech over it is a barge-in.
	replying atomic.Bool
	// finishing is set once the turn has stored its reply and is ending
	// its chain: its history is about to be free.
	finishing atomic.Bool
	// sentAll is set once the turn has said everything it had to say
	// (backend-synth-complete goes out next).
	sentAll atomic.Bool

	sentMu    sync.Mutex
	sent      []sentPiece // the audio pieces sent so far, in order
	firstSent time.Time
}

type sentPiece struct {
	text string
	dur  time.Duration
}

func newTurn(parent context.Context) *turn {
	ctx, cancel := context.WithCancelCause(parent)
	// Watchers lag behind the client a little, and the turn's context
	// ends as soon as the client has everything: their frames go by a
	// context of their own, which ends only when the turn is stopped
	// before it finished (finish cancels with no cause; a client that
	// leaves as its turn ends its chain takes nothing from its watchers,
	// nor one that starts its next turn once this one has said
	// everything, as a Realtime client does at response.done) and is
	// otherwise left to the collector.
	watch, stopWatch := context.WithCancel(context.Background())
	t := &turn{done: make(chan struct{}), playback: make(chan struct{}, 1), hurry: make(chan struct{}), id: newRunID()}
	t.ctx = context.WithValue(ctx, watchContextKey{}, &watchCtx{ctx: watch, id: t.id})
	t.cancel = func(cause error) {
		if cause != nil && !t.finishing.Load() && !(t.sentAll.Load() && errors.Is(cause, errSuperseded)) {
			stopWatch()
		}
		cancel(cause)
	}
	return t
}

// watchContextKey finds a turn's context for its watchers' frames.
type watchContextKey struct{}

// newRunID is a random id for a turn.
func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}

// hurryUp tells the turn that a stop waits for it.
func (t *turn) hurryUp() { t.hurryOnce.Do(func() { close(t.hurry) }) }

// playbackComplete counts only once backend-synth-complete is out: a late
// frame from the previous turn must not end this one early.
func (t *turn) playbackComplete() {
	if !t.awaitingPlayback.Load() {
		return
	}
	select {
	case t.playback <- struct{}{}:
	default:
	}
}

// addSent records a piece once it is on its way to the client.
func (t *turn) addSent(text string, dur time.Duration) {
	t.sentMu.Lock()
	defer t.sentMu.Unlock()
	if len(t.sent) == 0 {
		t.firstSent = time.Now()
	}
	t.sent = append(t.sent, sentPiece{text, dur})
}

// heardText estimates what the user has heard of the reply when the
// server itself stops it (barge-in): pieces are sent well ahead of
// playback, so it counts the pieces that have started playing, assuming
// playback began when the first one was sent.
func (t *turn) heardText() string {
	t.sentMu.Lock()
	defer t.sentMu.Unlock()
	elapsed := time.Since(t.firstSent)
	var b strings.Builder
	var start time.Duration
	for _, p := range t.sent {
		if start > elapsed {
			break
		}
		b.WriteString(p.text)
		start += p.dur
	}
	return b.String()
}
