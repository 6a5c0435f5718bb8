// Package fakellmtest starts the fake OpenAI-compatible server for the
// tests of other packages' clients (the tts and asr engines), and waits on
// what it sees.
package fakellmtest

import (
	"testing"
	"time"

	"koe/internal/fakellm"
)

// Start starts a fake server with the default answers on a free loopback
// port, closed at cleanup; a failing Close fails the test.
func Start(t testing.TB) *fakellm.Server {
	t.Helper()
	s, err := fakellm.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// WaitDisconnect waits for the server to see the client leave: proof that
// the HTTP request was aborted, not left running.
func WaitDisconnect(t testing.TB, s *fakellm.Server) {
	t.Helper()
	select {
	case <-s.Disconnects():
	case <-time.After(10 * time.Second): // a hang guard, not a speed assertion
		t.Fatal("the server saw no disconnect")
	}
}
