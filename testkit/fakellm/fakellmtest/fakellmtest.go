// Package fakellmtest starts the fake OpenAI-compatible server for the
// tests of other packages' clients (the tts and asr engines), and waits,
// with one hang guard and no speed assertion, for what the server and the
// client see.
package fakellmtest

import (
	"testing"

	"koe/testkit/fakellm"
)

// Start starts a fake server with the default answers on a free loopback
// port, closed at cleanup; a failing Close fails the test.
func Start(t testing.TB) *fakellm.Server {
	t.Helper()
	return StartWith(t, nil)
}

// StartWith is Start with respond answering the chat requests.
func StartWith(t testing.TB, respond func(fakellm.Request) fakellm.Reply) *fakellm.Server {
	t.Helper()
	s, err := fakellm.Start("127.0.0.1:0", respond)
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
