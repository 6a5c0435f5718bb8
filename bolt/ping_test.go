package bolt

import (
	"context"
	"testing"
)

// Ping answers while the database is open and fails once it is closed.
func TestPing(t *testing.T) {
	s, _ := openTest(t, Options{})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("ping of an open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); err == nil {
		t.Fatal("ping of a closed store succeeded")
	}
}
