package coord

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"koe/testkit/redistest"
)

// failoverLease is longer than hangGuard: a claim that returns within
// coord.wait (hangGuard) did not wait for a lease to expire.
const failoverLease = 3 * hangGuard

// countingObserver records what a coordinator reports to its Observer.
type countingObserver struct {
	mu        sync.Mutex
	waits     map[string]int
	retries   map[string]int
	takeovers int
	trips     int
}

func newCountingObserver() *countingObserver {
	return &countingObserver{waits: map[string]int{}, retries: map[string]int{}}
}

func (o *countingObserver) LeaseWait(outcome string, _ time.Duration) {
	o.mu.Lock()
	o.waits[outcome]++
	o.mu.Unlock()
}

func (o *countingObserver) RedisRoundTrip(time.Duration) {
	o.mu.Lock()
	o.trips++
	o.mu.Unlock()
}

func (o *countingObserver) ReleaseRetried(result string) {
	o.mu.Lock()
	o.retries[result]++
	o.mu.Unlock()
}

func (o *countingObserver) DeadInstanceTakeover() {
	o.mu.Lock()
	o.takeovers++
	o.mu.Unlock()
}

func (o *countingObserver) snapshot() (waits, retries map[string]int, takeovers, trips int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	waits, retries = map[string]int{}, map[string]int{}
	for k, v := range o.waits {
		waits[k] = v
	}
	for k, v := range o.retries {
		retries[k] = v
	}
	return waits, retries, o.takeovers, o.trips
}

// failoverInstance is an instance with a lease that never expires within
// a test, reached at url (redis-server's, or a proxy's), and heartbeat.
func failoverInstance(t testing.TB, url, name string, heartbeat time.Duration) (*RedisCoordinator, *logWatch, *countingObserver) {
	t.Helper()
	w := newLogWatch(t, name)
	cfg := testConfig(url)
	cfg.Lease, cfg.Heartbeat = failoverLease, heartbeat
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r, err := NewRedis(ctx, cfg, slog.New(w))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	obs := newCountingObserver()
	r.Observe(obs)
	return r, w, obs
}

// A turn that ends while Redis is down cannot release its lease; Redis
// restarts with its append-only file, and the lease with it. The release
// is done once the instance reaches Redis again, and the next turn in the
// history, on another instance, gets it then, not at the lease's expiry
// (which is past coord.wait here: waiting for it fails the claim).
func TestReleaseRetriedAfterRedisRestart(t *testing.T) {
	srv := redistest.StartAOF(t)
	a, _, aObs := failoverInstance(t, srv.URL(), "A", failoverLease)
	b, bLog, bObs := failoverInstance(t, srv.URL(), "B", failoverLease)

	endDuringOutage(t, srv, b, bLog, "h-outage")

	next := claim(t, a, "h-outage", "run-next", newTurn())
	defer next.Release()
	bLog.waitFor("released an ended turn's lease once redis answered again", 1)
	if _, retries, _, _ := bObs.snapshot(); retries[RetryReleased] != 1 {
		t.Fatalf("releases retried %v, want one released", retries)
	}
	// The claim either found the lease released already, or waited for
	// that release: never for its expiry.
	if waits, _, _, _ := aObs.snapshot(); waits[WaitExpired] != 0 || waits[WaitTakenOver] != 0 {
		t.Fatalf("lease waits %v, want none ended by expiry or take-over", waits)
	}
}

// endDuringOutage runs a turn in history on c that ends while srv is
// down, and starts srv again (with its append-only file: the lease is
// there again).
func endDuringOutage(t *testing.T, srv *redistest.Server, c *RedisCoordinator, log *logWatch, history string) {
	t.Helper()
	lease := claim(t, c, history, "run-ended", newTurn())
	srv.Stop()
	lease.Release()
	log.waitFor("could not release a turn's lease; released once redis answers again", 1)
	srv.Start()
}

// A turn of this instance whose release failed while Redis was away is
// released by this instance's next claim in that history at once, even
// before the heartbeat comes round to it.
func TestOwnPendingReleaseDoneByNextClaim(t *testing.T) {
	srv := redistest.StartAOF(t)
	b, bLog, bObs := failoverInstance(t, srv.URL(), "B", failoverLease)
	endDuringOutage(t, srv, b, bLog, "h-own")
	next := claim(t, b, "h-own", "run-next", newTurn())
	next.Release()
	if _, retries, _, _ := bObs.snapshot(); retries[RetryReleased] != 1 {
		t.Fatalf("releases retried %v, want one released", retries)
	}
}

// An instance dies mid-turn (it stops talking to Redis without releasing
// anything): the next claim in its history, on another instance, takes
// its lease over once its heartbeat has expired, not after coord.lease
// (past coord.wait here), says so in the log and counts it.
func TestDeadInstanceTakenOver(t *testing.T) {
	srv := redistest.Start(t)
	a, aLog, aObs := failoverInstance(t, srv.URL(), "A", testLease)
	// B reaches Redis through a proxy that its death cuts: no release, no
	// last word, its heartbeat left to expire.
	way := redistest.NewProxy(t, srv)
	b, _, _ := failoverInstance(t, way.URL(), "B", testLease)
	claim(t, b, "h-dead", "run-dead", newTurn())
	died := time.Now()
	way.Cut()
	tt := newTurn()
	lease := claim(t, a, "h-dead", "run-next", tt)
	defer lease.Release()
	t.Logf("history taken over %s after its instance died (coord.heartbeat %s, coord.lease %s)",
		time.Since(died).Round(time.Millisecond), testLease, failoverLease)
	aLog.waitFor("took over the lease of a dead instance", 1)
	waits, _, takeovers, trips := aObs.snapshot()
	if takeovers != 1 || waits[WaitTakenOver] != 1 {
		t.Fatalf("take-overs %d, lease waits %v; want one taken over", takeovers, waits)
	}
	if trips == 0 {
		t.Fatal("no redis round trip was reported")
	}
	// The new turn holds the history: another claim waits for it.
	spy := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
	defer spy.Close()
	holder, err := spy.Get(context.Background(), leasePrefix+"h-dead").Result()
	if err != nil || instanceOfLease(holder) != a.instance {
		t.Fatalf("the lease after the take-over: %q, %v; want A's", holder, err)
	}
}

// A stop of a turn whose instance died is not left waiting for the
// lease's expiry (past coord.wait here): once the instance's heartbeat has
// expired the turn is known to be gone, its lease is cleared, and the
// stop answers.
func TestStopFindsDeadInstance(t *testing.T) {
	srv := redistest.Start(t)
	a, aLog, aObs := failoverInstance(t, srv.URL(), "A", testLease)
	way := redistest.NewProxy(t, srv)
	b, _, _ := failoverInstance(t, way.URL(), "B", testLease)
	claim(t, b, "h-stop", "run-dead", newTurn())
	way.Cut()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := a.Stop(ctx, "h-stop"); err != nil {
		t.Fatalf("stop of a dead instance's turn: %v", err)
	}
	aLog.waitFor(stopFoundDead, 1)
	if _, _, takeovers, _ := aObs.snapshot(); takeovers != 1 {
		t.Fatalf("take-overs %d, want the stop's one", takeovers)
	}
	next := claim(t, a, "h-stop", "run-next", newTurn())
	next.Release()
}

// An instance that shuts down with a turn it could not end deletes its
// heartbeat as it closes, so that the next claim in that history need not
// wait out coord.heartbeat; the claim takes the lease over. (A Redis
// started moments ago holds take-overs for twice coord.heartbeat, hence
// the short one here.)
func TestClosedInstanceTakenOverAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	a, aLog, _ := failoverInstance(t, srv.URL(), "A", testLease)
	b, _, _ := failoverInstance(t, srv.URL(), "B", testLease)
	claim(t, b, "h-closed", "run-closed", newTurn())
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	spy := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
	defer spy.Close()
	if n, err := spy.Exists(context.Background(), beatPrefix+b.instance).Result(); err != nil || n != 0 {
		t.Fatalf("a closed instance's heartbeat: %d keys, %v; want it deleted", n, err)
	}
	next := claim(t, a, "h-closed", "run-next", newTurn())
	defer next.Release()
	aLog.waitFor("took over the lease of a dead instance", 1)
}

// A Redis with an append-only file comes back after a restart without the
// heartbeat of an instance that is alive but could not reach it for
// longer than coord.heartbeat, and with that instance's lease. A claim
// made at once must not take the lease over: the instance sets its
// heartbeat again once it reaches Redis, and its turn is asked to stop as
// usual.
func TestLiveInstanceKeepsItsLeaseAfterRedisRestart(t *testing.T) {
	const beat = 2 * time.Second // its reconnection may wait a second (go-redis's dial probe)
	srv := redistest.StartAOF(t)
	way := redistest.NewProxy(t, srv)
	a, aLog, aObs := failoverInstance(t, srv.URL(), "A", beat)
	b, bLog, _ := failoverInstance(t, way.URL(), "B", beat)
	tt := newTurn()
	lease := claim(t, b, "h-live", "run-live", tt)
	go func() {
		<-tt.stopped
		lease.Release()
	}()

	expired := keyExpired(t, srv, beatPrefix+b.instance)
	way.Cut()
	bLog.waitFor(beatFailing, 1)
	wait(t, expired, "B's heartbeat expired while B could not reach redis")
	srv.Stop()
	srv.Start()
	way.Mend()

	next := claim(t, a, "h-live", "run-next", newTurn())
	defer next.Release()
	if !tt.takenOver.Load() {
		t.Fatal("B's turn was not told it was taken over")
	}
	if n := aLog.Count("took over the lease of a dead instance"); n != 0 {
		t.Fatal("a live instance's lease was taken over as a dead one's")
	}
	if waits, _, takeovers, _ := aObs.snapshot(); takeovers != 0 || waits[WaitReleased] != 1 {
		t.Fatalf("take-overs %d, lease waits %v; want one wait ended by the release", takeovers, waits)
	}
}

// keyExpired returns a channel closed once Redis expires key. It waits on
// keyspace events, not time.
func keyExpired(t testing.TB, srv *redistest.Server, key string) <-chan struct{} {
	t.Helper()
	_, sub := keyspaceEvents(t, srv, key, "Kx")
	t.Cleanup(func() { _ = sub.Close() })
	done := make(chan struct{})
	go func() {
		for m := range sub.Channel() {
			if m.Payload == "expired" {
				close(done)
				return
			}
		}
	}()
	return done
}
