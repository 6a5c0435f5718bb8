package bolt

import (
	"context"
	"fmt"
)

// Check verifies the structure of the whole database file (page
// reachability, free list, key order) with bbolt's consistency check and
// returns the first problem found, or nil.
func (s *Store) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("check history database: %w", err)
	}
	// A writable transaction, though nothing is written: the check reads
	// the free list that writers change, so it must not run beside one.
	tx, err := s.db.Begin(true)
	if err != nil {
		return fmt.Errorf("check history database: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var first error
	// Drained to the end: the checker's goroutine blocks until every
	// problem is received.
	for err := range tx.Check() {
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("check history database: %w", first)
	}
	return nil
}
