// Package testkit holds what koe's tests share across packages; its
// subpackages are the rigs (a fake LLM, test servers, a browser driver).
package testkit

import (
	"testing"
	"time"
)

// HangGuard bounds every wait in koe's tests. Reaching it means a hang,
// never slowness: CI is a loaded 2-core machine, so no test may depend on
// anything happening within a shorter time.
const HangGuard = time.Minute

// Eventually waits until ok holds, asking again after a pause that grows
// from a millisecond to a tenth of a second, and fails the test, naming
// what did not happen, once HangGuard has passed. It is for states that no
// event announces (a process that appears, a counter read through an
// API); where there is an event, wait for the event.
func Eventually(t testing.TB, what string, ok func() bool) {
	t.Helper()
	Await(t, what, func() (struct{}, bool) { return struct{}{}, ok() })
}

// Await is Eventually for a state with a value: it asks get until get
// says the value is the one awaited and returns it. A test that hangs
// fails naming what it waited for and the last value get gave.
func Await[T any](t testing.TB, what string, get func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(HangGuard)
	pause := time.Millisecond
	for {
		v, ok := get()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so within %s; last seen: %+v", what, HangGuard, v)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// External skips the test in the short lane (go test -short), which runs
// every unit test with fakes and no program from outside koe; what names
// the program the test needs. ./scripts/test.sh runs everything.
func External(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: not in the short lane (go test -short); ./scripts/test.sh runs it", what)
	}
}
