package recall

import "time"

// StartPreload loads every character's index in the background (Preload),
// so that the first turn after a restart finds it ready; a turn that
// comes sooner waits for its own character's. What fails is loaded at the
// character's next turn. Close stops it; call it before Close.
func (s *Service) StartPreload() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		start := time.Now()
		if err := s.Preload(s.ctx); err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("recall: could not load the characters' memories; they are loaded at their next turn", "err", err)
			}
			return
		}
		s.log.Debug("recall: memories loaded", "took", time.Since(start).Round(time.Millisecond))
	}()
}
