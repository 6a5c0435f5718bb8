package live

import "context"

// Drain lets the turn the live chat runs here end, and starts no other:
// messages keep queueing until Close, which (with an election) hands the
// chat to another instance. It returns once no live turn runs here, or
// ctx has ended, and reports whether one was running. A nil Service, or
// one that does not run the chat here, has nothing to drain.
func (s *Service) Drain(ctx context.Context) bool {
	if s == nil {
		return false
	}
	c := s.current()
	if c == nil {
		return false
	}
	c.runner.Pause() // here only: the streamer's pause shared with the instances is untouched
	idle := make(chan struct{})
	if !c.live.Drain(func() { close(idle) }) {
		return false
	}
	s.log.Info("drain: waiting for the live chat's running turn")
	select {
	case <-idle:
	case <-ctx.Done():
	}
	return true
}
