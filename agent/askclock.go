package agent

import (
	"context"
	"sync"
	"time"
)

// A time limit on a tool call must not run while the user is being asked
// something on the call's behalf (a confirmation, a server's question):
// people take longer to answer than tools.timeout allows a tool. So the
// limits of a call are clocks that an Ask stops while it waits.

// clock is a time limit that can be stopped and started again.
type clock struct {
	mu       sync.Mutex
	left     time.Duration
	started  time.Time
	timer    *time.Timer // nil while stopped or fired
	stops    int         // asks under way
	fire     func()
	finished bool
}

func (c *clock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stops++
	if c.stops > 1 || c.timer == nil {
		return
	}
	if c.timer.Stop() {
		c.left -= time.Since(c.started)
		c.timer = nil
	}
}

func (c *clock) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stops--
	if c.stops > 0 || c.timer != nil || c.finished {
		return
	}
	c.started = time.Now()
	c.timer = time.AfterFunc(max(c.left, 0), c.fire)
}

func (c *clock) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finished = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// timedOut is a context ended by its clock: its Err is
// context.DeadlineExceeded, as context.WithTimeout's would be, so callers
// word it as a time limit.
type timedOut struct {
	context.Context
	fired chan struct{}
}

func (t *timedOut) Err() error {
	err := t.Context.Err()
	if err == nil {
		return nil
	}
	select {
	case <-t.fired:
		return context.DeadlineExceeded
	default:
		return err
	}
}

type clocksKey struct{}

// WithCallTimeout is context.WithTimeout for a tool call, except that the
// time an Ask (see AskerFrom) spends waiting for the user does not count.
func WithCallTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	fired := make(chan struct{})
	var once sync.Once
	c := &clock{left: d, started: time.Now()}
	c.fire = func() {
		once.Do(func() { close(fired) })
		cancel(context.DeadlineExceeded)
	}
	c.timer = time.AfterFunc(d, c.fire)
	prev, _ := parent.Value(clocksKey{}).([]*clock)
	clocks := append(prev[:len(prev):len(prev)], c)
	out := &timedOut{Context: context.WithValue(ctx, clocksKey{}, clocks), fired: fired}
	return out, func() {
		c.end()
		cancel(context.Canceled)
	}
}

// stopClocks stops every call clock of ctx until the returned function is
// called.
func stopClocks(ctx context.Context) func() {
	clocks, _ := ctx.Value(clocksKey{}).([]*clock)
	for _, c := range clocks {
		c.stop()
	}
	return func() {
		for _, c := range clocks {
			c.start()
		}
	}
}
