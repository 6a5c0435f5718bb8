package bolt

import (
	"context"
	"fmt"

	"go.etcd.io/bbolt"
)

// Ping checks that the database answers: one read transaction, which a
// closed or broken database fails. A read cannot be cancelled: past ctx
// the check answers and the read's goroutine ends with the read.
func (s *Store) Ping(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.db.View(func(*bbolt.Tx) error { return nil }) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("store: ping: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
