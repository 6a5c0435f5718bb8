package server

import (
	"testing"
	"testing/synctest"
	"time"
)

// A rate-limited log line goes through at most once per interval and says
// how many were held back since the last.
func TestRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := rateLimited{every: time.Minute}
		if n, ok := r.due(); !ok || n != 1 {
			t.Fatalf("first event: %d, %v; want through, counting itself", n, ok)
		}
		for range 5 {
			if _, ok := r.due(); ok {
				t.Fatal("an event within the minute went through")
			}
		}
		time.Sleep(59 * time.Second)
		if _, ok := r.due(); ok {
			t.Fatal("an event after 59 s went through")
		}
		time.Sleep(time.Second)
		if n, ok := r.due(); !ok || n != 7 {
			t.Fatalf("the event a minute on: %d, %v; want through, counting the 6 held back and itself", n, ok)
		}
	})
}
