package fakellmtest

import (
	"testing"
	"time"

	"koe/testkit/fakellm"
)

// HangGuard bounds every wait for an event in the tests that use the fake
// server. Only a bug makes a wait last that long; a loaded CI machine
// makes it slow, so nothing here asserts how fast something happened.
const HangGuard = 30 * time.Second

// WaitDisconnect waits for the server to see the client leave: proof that
// the HTTP request was aborted, not left running.
func WaitDisconnect(t testing.TB, s *fakellm.Server) {
	t.Helper()
	select {
	case <-s.Disconnects():
	case <-time.After(HangGuard):
		t.Fatalf("the server saw no disconnect within %v", HangGuard)
	}
}

// Signal makes a channel that remembers one event, for a fake server's
// answer function (which must not block) to tell the test it ran.
func Signal() chan struct{} { return make(chan struct{}, 1) }

// Notify records an event on c without blocking; one already pending is
// enough.
func Notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// WaitFor waits for an event on c, or fails naming what did not happen.
func WaitFor(t testing.TB, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(HangGuard):
		t.Fatalf("%s did not happen within %v", what, HangGuard)
	}
}
