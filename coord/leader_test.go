package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"koe/testkit"
	"koe/testkit/redistest"
)

// tracker records which instances run the elected job, and when two ever
// do at once. lead calls it on entering (before the job starts) and on
// leaving (after it has stopped), so an overlap of the jobs is an overlap
// here.
type tracker struct {
	mu      sync.Mutex
	running map[string]bool
	most    int
	starts  []string
	change  chan struct{}
}

func newTracker() *tracker {
	return &tracker{running: map[string]bool{}, change: make(chan struct{})}
}

func (tr *tracker) set(name string, on bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.running[name] = on
	if on {
		tr.starts = append(tr.starts, name)
	}
	n := 0
	for _, r := range tr.running {
		if r {
			n++
		}
	}
	tr.most = max(tr.most, n)
	close(tr.change)
	tr.change = make(chan struct{})
}

// waitFor waits until ok holds (under the tracker's lock).
func (tr *tracker) waitFor(t testing.TB, what string, ok func(tr *tracker) bool) {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		tr.mu.Lock()
		done, ch := ok(tr), tr.change
		tr.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: not within %s (started: %v)", what, hangGuard, tr.starts)
		}
	}
}

// leading is the instance that runs the job, "" if none.
func (tr *tracker) leading() string {
	for name, on := range tr.running {
		if on {
			return name
		}
	}
	return ""
}

func (tr *tracker) check(t testing.TB) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.most > 1 {
		t.Fatalf("%d instances ran the job at once (started: %v)", tr.most, tr.starts)
	}
}

// candidate is one instance taking part in an election.
type candidate struct {
	name   string
	l      *Leader
	log    *logWatch
	cancel context.CancelFunc
	done   chan struct{}
}

// stop leaves the election (releasing the lead if held) and waits.
func (c *candidate) stop(t testing.TB) {
	t.Helper()
	c.cancel()
	wait(t, c.done, c.name+" left the election")
}

// join runs an election of "job" on a coordinator at url with lease
// coord.lease; lead marks the tracker while it runs.
func join(t testing.TB, url, name string, lease time.Duration, tr *tracker, answer func(context.Context, []byte) ([]byte, error)) *candidate {
	t.Helper()
	w := newLogWatch(t, name)
	cfg := testConfig(url)
	cfg.Lease = lease
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r, err := NewRedis(ctx, cfg, slog.New(w))
	if err != nil {
		t.Fatal(err)
	}
	c := &candidate{name: name, l: r.NewLeader("job"), log: w, done: make(chan struct{})}
	runCtx, stop := context.WithCancel(context.Background())
	c.cancel = stop
	if answer == nil {
		answer = func(_ context.Context, req []byte) ([]byte, error) { return []byte(name + ":" + string(req)), nil }
	}
	go func() {
		defer close(c.done)
		err := c.l.Run(runCtx, func(ctx context.Context) {
			tr.set(name, true)
			<-ctx.Done()
			tr.set(name, false)
		}, answer)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}()
	t.Cleanup(func() {
		stop()
		<-c.done
		_ = r.Close()
	})
	return c
}

// markKnown makes Redis remember an election of "job", so that the first
// leader starts at once.
func markKnown(t testing.TB, srv *redistest.Server) {
	t.Helper()
	spy := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
	defer spy.Close()
	if err := spy.Set(context.Background(), knownPrefix+"job", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// Of three instances one leads; when it leaves, another takes over at
// once, told by the release: the lease here is so long that their own
// retries (every third of it) would come after the test's guard.
func TestLeaderHandOver(t *testing.T) {
	srv := redistest.Start(t)
	markKnown(t, srv)
	long := 6 * hangGuard
	tr := newTracker()
	cs := map[string]*candidate{}
	for _, name := range []string{"A", "B", "C"} {
		cs[name] = join(t, srv.URL(), name, long, tr, nil)
	}
	tr.waitFor(t, "a leader", func(tr *tracker) bool { return tr.leading() != "" })
	for round := 1; round <= 2; round++ {
		tr.mu.Lock()
		first := tr.leading()
		tr.mu.Unlock()
		// The others know who leads.
		for name, c := range cs {
			if name == first {
				if st := c.l.State(); st.Role != RoleLeader || st.Leader != st.Instance {
					t.Fatalf("%s runs the job but its state is %+v", name, st)
				}
				continue
			}
			c.log.waitFor("standing by", 1)
		}
		start := time.Now()
		cs[first].stop(t)
		delete(cs, first)
		tr.waitFor(t, "another leader", func(tr *tracker) bool { l := tr.leading(); return l != "" && l != first })
		t.Logf("round %d: %s left, the next leader started %s later", round, first, time.Since(start).Round(time.Microsecond))
	}
	tr.check(t)
}

// A leader cut off from Redis (as good as dead to the others) stops its
// job before another instance can take the lead; the other takes it once
// the lead expires. Back, the first stands by.
func TestLeaderCutOffStepsDown(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv)
	tr := newTracker()
	a := join(t, proxy.URL(), "A", testLease, tr, nil)
	tr.waitFor(t, "A leads", func(tr *tracker) bool { return tr.running["A"] })
	// Redis knew no earlier election: A waited coord.lease first.
	a.log.waitFor("this instance holds the lead; as redis had no record of an earlier leader, it starts after coord.lease so that such a leader has stopped", 1)
	b := join(t, srv.URL(), "B", testLease, tr, nil)
	b.log.waitFor("standing by", 1)

	cut := time.Now()
	proxy.Cut()
	tr.waitFor(t, "B leads", func(tr *tracker) bool { return tr.running["B"] })
	t.Logf("B took over %s after A was cut off (coord.lease %s)", time.Since(cut).Round(time.Millisecond), testLease)
	a.log.waitFor("stepped down: the lead could not be renewed for two thirds of coord.lease; another instance may take it once it expires", 1)
	tr.check(t)
	// B started at once: Redis knew the election.
	if n := b.log.Count("this instance holds the lead; as redis had no record of an earlier leader, it starts after coord.lease so that such a leader has stopped"); n != 0 {
		t.Fatalf("B waited as after a Redis without data")
	}

	a.log.waitFor("could not reach redis to take part in the election; retrying", 1)
	proxy.Mend()
	a.log.waitFor("redis answers the election again", 1)
	if st := a.l.State(); st.Role != RoleStandby || st.Leader != b.l.State().Instance {
		t.Fatalf("A back: %+v, B is %s", st, b.l.State().Instance)
	}
	tr.check(t)
}

// redis-server restarted without its data, both instances connected:
// either keeps or takes the lead, never both; then one leads and the
// other stands by.
func TestLeaderRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	tr := newTracker()
	a := join(t, srv.URL(), "A", testLease, tr, nil)
	tr.waitFor(t, "A leads", func(tr *tracker) bool { return tr.running["A"] })
	b := join(t, srv.URL(), "B", testLease, tr, nil)
	b.log.waitFor("standing by", 1)

	for i := range 3 {
		srv.Stop()
		srv.Start()
		spy := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
		waitKey(t, spy, holderPrefix+"job")
		_ = spy.Close()
		tr.waitFor(t, "a leader after the restart", func(tr *tracker) bool { return tr.leading() != "" })
		waitSettled(t, a, b)
		tr.mu.Lock()
		t.Logf("restart %d: %s leads", i+1, tr.leading())
		tr.mu.Unlock()
		tr.check(t)
	}
}

// waitSettled waits until one candidate leads and the other stands by
// knowing it.
func waitSettled(t testing.TB, a, b *candidate) {
	t.Helper()
	testkit.Eventually(t, "one candidate leads and the other stands by knowing it", func() bool {
		sa, sb := a.l.State(), b.l.State()
		return (sa.Role == RoleLeader && sb.Role == RoleStandby && sb.Leader == sa.Instance) ||
			(sb.Role == RoleLeader && sa.Role == RoleStandby && sa.Leader == sb.Instance)
	})
}

// The leader cut off from Redis while Redis restarts without its data:
// the other instance takes the lead of a Redis that remembers no
// election and waits coord.lease before it starts, by which time the old
// leader has stopped on its own.
func TestLeaderRedisRestartWhileCutOff(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv)
	markKnown(t, srv)
	tr := newTracker()
	a := join(t, proxy.URL(), "A", testLease, tr, nil)
	tr.waitFor(t, "A leads", func(tr *tracker) bool { return tr.running["A"] })
	b := join(t, srv.URL(), "B", testLease, tr, nil)
	b.log.waitFor("standing by", 1)

	proxy.Cut()
	srv.Stop()
	srv.Start()
	b.log.waitFor("this instance holds the lead; as redis had no record of an earlier leader, it starts after coord.lease so that such a leader has stopped", 1)
	tr.waitFor(t, "B leads", func(tr *tracker) bool { return tr.running["B"] })
	a.log.waitFor("stepped down: the lead could not be renewed for two thirds of coord.lease; another instance may take it once it expires", 1)
	tr.check(t)
	a.log.waitFor("could not reach redis to take part in the election; retrying", 1)
	proxy.Mend()
	a.log.waitFor("redis answers the election again", 1)
	waitSettled(t, a, b)
	tr.check(t)
}

// waitKey waits until key exists, on keyspace events.
func waitKey(t testing.TB, c *redis.Client, key string) {
	t.Helper()
	ctx := context.Background()
	if err := c.ConfigSet(ctx, "notify-keyspace-events", "K$").Err(); err != nil {
		t.Fatal(err)
	}
	sub := c.Subscribe(ctx, "__keyspace@0__:"+key)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, key).Result(); err == nil && n == 1 {
		return
	}
	select {
	case <-sub.Channel():
	case <-time.After(hangGuard):
		t.Fatalf("%s not set within %s", key, hangGuard)
	}
}

// A request made on a standing-by instance reaches the leader's answer
// function and its answer (or error) comes back; without a leader, Ask
// says so; a leader that does not answer makes Ask fail within
// coord.lease; one that is only starting says so.
func TestLeaderAsk(t *testing.T) {
	srv := redistest.Start(t)
	lease := 3 * time.Second // long enough to ask while A is starting
	tr := newTracker()
	release := make(chan struct{})
	a := join(t, srv.URL(), "A", lease, tr, func(_ context.Context, req []byte) ([]byte, error) {
		switch string(req) {
		case "fail":
			return nil, errors.New("the job refuses")
		case "hang":
			<-release
		}
		return []byte("A heard " + string(req)), nil
	})
	b := join(t, srv.URL(), "B", lease, tr, nil)
	ctx := context.Background()

	a.log.waitFor("this instance holds the lead; as redis had no record of an earlier leader, it starts after coord.lease so that such a leader has stopped", 1)
	tr.mu.Lock()
	started := tr.leading() != ""
	tr.mu.Unlock()
	if !started {
		if _, err := b.l.Ask(ctx, []byte("early")); err == nil || !strings.Contains(err.Error(), "starts only after coord.lease") {
			t.Fatalf("ask while the leader is starting: %v", err)
		}
	}
	tr.waitFor(t, "A leads", func(tr *tracker) bool { return tr.running["A"] })

	got, err := b.l.Ask(ctx, []byte("pause\nplease"))
	if err != nil || string(got) != "A heard pause\nplease" {
		t.Fatalf("ask = %q, %v", got, err)
	}
	// The leader may ask itself.
	if got, err := a.l.Ask(ctx, []byte("x")); err != nil || string(got) != "A heard x" {
		t.Fatalf("the leader asking itself = %q, %v", got, err)
	}
	if _, err := b.l.Ask(ctx, []byte("fail")); err == nil || !strings.Contains(err.Error(), "the job refuses") {
		t.Fatalf("ask answered by an error: %v", err)
	}
	if _, err := b.l.Ask(ctx, []byte("hang")); err == nil || !strings.Contains(err.Error(), "did not answer within coord.lease") {
		t.Fatalf("ask of a leader that does not answer: %v", err)
	}
	close(release)

	a.stop(t)
	b.stop(t)
	if _, err := b.l.Ask(ctx, []byte("anyone?")); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("ask without a leader: %v", err)
	}
	tr.check(t)
}

// A job that ends on its own gives the lead up; another instance takes it.
func TestLeaderJobEndsOnItsOwn(t *testing.T) {
	srv := redistest.Start(t)
	markKnown(t, srv)
	tr := newTracker()
	cfg := testConfig(srv.URL())
	w := newLogWatch(t, "A")
	r, err := NewRedis(context.Background(), cfg, slog.New(w))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l := r.NewLeader("job")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.Run(ctx, func(context.Context) {
			tr.set("A", true)
			tr.set("A", false) // gives up at once
		}, nil)
	}()
	defer func() { cancel(); <-done }()
	tr.waitFor(t, "A leads", func(tr *tracker) bool { return len(tr.starts) == 1 })
	join(t, srv.URL(), "B", testLease, tr, nil)
	tr.waitFor(t, "B leads", func(tr *tracker) bool { return tr.running["B"] })
	w.waitFor("the lead's job ended on its own; giving the lead up", 1)
	tr.check(t)
}

// The successive leaders share a small state.
func TestLeaderShared(t *testing.T) {
	srv := redistest.Start(t)
	r, _ := instance(t, srv, "A")
	l := r.NewLeader("job")
	ctx := context.Background()
	if v, err := l.Shared(ctx, "paused"); err != nil || v != "" {
		t.Fatalf("unset field = %q, %v", v, err)
	}
	if err := l.SetShared(ctx, "paused", "1"); err != nil {
		t.Fatal(err)
	}
	r2, _ := instance(t, srv, "B")
	if v, err := r2.NewLeader("job").Shared(ctx, "paused"); err != nil || v != "1" {
		t.Fatalf("field set by another instance = %q, %v", v, err)
	}
	srv.Stop()
	if _, err := l.Shared(ctx, "paused"); err == nil || !strings.Contains(err.Error(), "read paused from redis") {
		t.Fatalf("shared state without redis: %v", err)
	}
}
