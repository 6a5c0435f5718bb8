package llm

import (
	"sync"
	"time"
)

// ManualClock is an idle clock a test runs out by hand: Expire fires it
// unless the stream has paused it, as a real timer would.
type ManualClock struct {
	mu      sync.Mutex
	running *sync.Cond // signalled whenever the clock starts or resumes
	paused  bool
	fire    func()
}

// UseManualClock makes c's streams use the returned clock.
func UseManualClock(c *Client) *ManualClock {
	m := &ManualClock{}
	m.running = sync.NewCond(&m.mu)
	c.startIdle = func(_ time.Duration, fire func()) idleTimer {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.fire, m.paused = fire, false
		m.running.Broadcast()
		return m
	}
	return m
}

// ExpireWhenRunning waits until the stream has started the clock and is not
// pausing it (it is waiting for the server), then runs it out.
func (m *ManualClock) ExpireWhenRunning() {
	m.mu.Lock()
	for m.fire == nil || m.paused {
		m.running.Wait()
	}
	fire := m.fire
	m.mu.Unlock()
	fire()
}

// Expire runs the clock out: the stream's idle timeout fires unless the
// clock is paused. It reports whether it fired.
func (m *ManualClock) Expire() bool {
	m.mu.Lock()
	fire, paused := m.fire, m.paused
	m.mu.Unlock()
	if paused || fire == nil {
		return false
	}
	fire()
	return true
}

func (m *ManualClock) pause() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused = true
}

func (m *ManualClock) resume() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused = false
	m.running.Broadcast()
}
