package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"koe/testkit"
	"koe/testkit/pgtest"
)

// TestStopLatencyScenario runs -scenario stop-latency once with small
// numbers, against koe binaries built from this tree: one instance, and
// three sharing a PostgreSQL schema and a redis-server koe-load starts.
// Every stop of every kind must reach every watcher, on the speaker's
// instance and on the others, and nothing of a stopped turn may follow
// its interrupt. (The latencies are koe-load's report, not the test's.)
func TestStopLatencyScenario(t *testing.T) {
	testkit.External(t, "a koe binary built with go build")
	o := options{koeBin: buildKoeForLoad(t), tps: 100, reply: defaultReply, timeout: testkit.HangGuard}
	kinds := []string{stopSignal, stopChat, stopStream}

	t.Run("one instance", func(t *testing.T) {
		checkStops(t, o, stopOptions{}, stopCell{instances: 1, watchers: 3, stops: 3, kinds: kinds})
	})
	t.Run("three instances", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		testkit.External(t, "redis-server")
		if _, err := exec.LookPath("redis-server"); err != nil {
			t.Skip("redis-server is not installed (Debian package redis-server)")
		}
		// Four watchers: one on the speaker's instance, two on the
		// second, one on the third.
		checkStops(t, o, stopOptions{pg: dsn}, stopCell{instances: 3, watchers: 4, stops: 3, kinds: kinds})
	})
}

// checkStops measures c and checks that every watcher was told of every
// stop.
func checkStops(t *testing.T, o options, so stopOptions, c stopCell) {
	t.Helper()
	r, err := measureStops(o, so, c)
	if err != nil {
		t.Fatal(err)
	}
	r.print()
	remote := 0
	for i := range c.watchers {
		if watcherInstance(i, c.instances) != 0 {
			remote++
		}
	}
	for _, k := range c.kinds {
		f := r.byKind[k]
		if len(f.each) != c.stops*c.watchers || len(f.last) != c.stops {
			t.Errorf("%s: %d interrupts over %d stops, want %d over %d", k, len(f.each), len(f.last), c.stops*c.watchers, c.stops)
		}
		if len(f.remote) != c.stops*remote {
			t.Errorf("%s: %d interrupts reached watchers on other instances, want %d", k, len(f.remote), c.stops*remote)
		}
		if want := map[bool]int{true: 0, false: c.stops}[k == stopSignal]; len(f.request) != want {
			t.Errorf("%s: %d stop requests timed, want %d", k, len(f.request), want)
		}
	}
	if r.stray != 0 {
		t.Errorf("%d frames reached watchers after their turn's interrupt", r.stray)
	}
}

// buildKoeForLoad builds koe from this tree, as koe-load's users do.
func buildKoeForLoad(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "koe")
	if out, err := exec.Command("go", "build", "-o", bin, "koe/cmd/koe").CombinedOutput(); err != nil {
		t.Fatalf("go build koe: %v\n%s", err, out)
	}
	return bin
}
