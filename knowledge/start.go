package knowledge

import (
	"context"
	"errors"
)

// Start catches the index up with the stored documents in the background
// (Open); what it could not is logged, and searches may miss it until the
// next start. Close stops it; call it before Close.
func (s *Service) Start() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.Open(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error("knowledge: could not catch the index up with the documents; searches may miss some until the next start", "err", err)
		}
	}()
}
