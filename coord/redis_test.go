package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"koe/conversation"
	"koe/testkit/logwatch"
	"koe/testkit/redistest"
)

// hangGuard bounds every wait: reached, it means a hang, never slowness.
const hangGuard = 30 * time.Second

// testLease is short so that expiry tests end soon; renewals come every
// third of it, so a loaded machine still renews in time.
const testLease = 900 * time.Millisecond

// logWatch lets a test wait for a log message.
type logWatch struct{ *logwatch.Handler }

func newLogWatch(t testing.TB, prefix string) *logWatch { return &logWatch{logwatch.New(t, prefix)} }

// waitFor waits until message has been logged n times in all.
func (w *logWatch) waitFor(message string, n int) { w.WaitFor(message, n) }

func testConfig(url string) Config {
	c := DefaultConfig()
	c.Backend, c.RedisURL, c.Lease, c.Wait, c.Heartbeat = Redis, url, testLease, hangGuard, testLease
	return c
}

// instance is one koe instance's coordinator.
func instance(t testing.TB, srv *redistest.Server, name string) (*RedisCoordinator, *logWatch) {
	t.Helper()
	w := newLogWatch(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r, err := NewRedis(ctx, testConfig(srv.URL()), slog.New(w))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, w
}

// turn is a fake turn: it records why it was stopped.
type turn struct {
	stopped   chan struct{}
	takenOver atomic.Bool
	once      sync.Once
}

func newTurn() *turn { return &turn{stopped: make(chan struct{})} }

func (tt *turn) stop(takenOver bool) {
	tt.once.Do(func() {
		tt.takenOver.Store(takenOver)
		close(tt.stopped)
	})
}

func wait(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Fatalf("%s: not within %s", what, hangGuard)
	}
}

func claim(t testing.TB, c conversation.Coordinator, history, id string, tt *turn) conversation.Lease {
	t.Helper()
	l, err := c.Claim(context.Background(), history, id, tt.stop)
	if err != nil {
		t.Fatalf("claim %s for %s: %v", history, id, err)
	}
	return l
}

// A stop requested on instance A stops the turn that instance B runs, and
// returns once B has released the history.
func TestStopReachesAnotherInstance(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := instance(t, srv, "A")
	b, _ := instance(t, srv, "B")
	testStop(t, a, b)
}

// The in-process coordinator keeps the same contract within a process.
func TestLocalCoordinator(t *testing.T) {
	t.Run("stop", func(t *testing.T) {
		c := conversation.NewLocalCoordinator()
		testStop(t, c, c)
	})
	t.Run("take-over", func(t *testing.T) {
		c := conversation.NewLocalCoordinator()
		testTakeOver(t, c, c)
	})
}

func testStop(t *testing.T, a, b conversation.Coordinator) {
	ctx := context.Background()

	if stopped, err := a.Stop(ctx, "h1"); err != nil || stopped {
		t.Fatalf("stop with no turn running = %v, %v; want false, nil", stopped, err)
	}

	var latencies []time.Duration
	for i := range 20 {
		tt := newTurn()
		lease := claim(t, b, "h1", fmt.Sprint("run-", i), tt)
		var released atomic.Bool
		go func() {
			<-tt.stopped
			released.Store(true)
			lease.Release()
		}()
		start := time.Now()
		type result struct {
			stopped bool
			err     error
		}
		res := make(chan result, 1)
		go func() {
			s, err := a.Stop(ctx, "h1")
			res <- result{s, err}
		}()
		wait(t, tt.stopped, "B's turn stopped")
		latencies = append(latencies, time.Since(start))
		var r result
		select {
		case r = <-res:
		case <-time.After(hangGuard):
			t.Fatal("stop did not return")
		}
		if r.err != nil || !r.stopped {
			t.Fatalf("stop = %v, %v; want true, nil", r.stopped, r.err)
		}
		if !released.Load() {
			t.Fatal("stop returned before the turn released its history")
		}
		if tt.takenOver.Load() {
			t.Fatal("a stop request was told to the turn as a take-over")
		}
	}
	t.Logf("stop latency (request on A → B's turn told), %d stops: %s", len(latencies), summarize(latencies))
}

func summarize(d []time.Duration) string {
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return fmt.Sprintf("p50 %s, p90 %s, max %s", s[len(s)/2], s[len(s)*9/10], s[len(s)-1])
}

// A turn claiming a history that another instance's turn runs in stops
// that one and starts only once it has released the history.
func TestTakeOverWaitsForRelease(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := instance(t, srv, "A")
	b, _ := instance(t, srv, "B")
	testTakeOver(t, a, b)
}

func testTakeOver(t *testing.T, a, b conversation.Coordinator) {
	old := newTurn()
	oldLease := claim(t, b, "h2", "run-old", old)
	var oldDone atomic.Bool
	go func() {
		<-old.stopped
		oldDone.Store(true)
		oldLease.Release()
	}()
	newer := newTurn()
	lease := claim(t, a, "h2", "run-new", newer)
	if !oldDone.Load() {
		t.Fatal("the new turn's claim returned before the old turn released the history")
	}
	if !old.takenOver.Load() {
		t.Fatal("the old turn was not told it was taken over")
	}
	select {
	case <-newer.stopped:
		t.Fatal("the new turn was stopped")
	default:
	}
	lease.Release()
}

// Of two claims waiting for a busy history, the newer one gets it; the
// older one is overtaken before it begins.
func TestNewestClaimWins(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := instance(t, srv, "A")
	b, _ := instance(t, srv, "B")
	spy := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
	defer spy.Close()
	ctx := context.Background()
	sub := spy.Subscribe(ctx, chStop)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	asks := sub.Channel()
	waitAsk := func() {
		t.Helper()
		select {
		case m := <-asks:
			if !strings.HasPrefix(m.Payload, "h3\n") || !strings.HasSuffix(m.Payload, "\n"+reasonTake) {
				t.Fatalf("unexpected stop message %q", m.Payload)
			}
		case <-time.After(hangGuard):
			t.Fatal("no take-over request")
		}
	}

	holder := newTurn()
	holderLease := claim(t, b, "h3", "run-1", holder)
	type result struct {
		lease conversation.Lease
		err   error
	}
	older, newer := make(chan result, 1), make(chan result, 1)
	go func() {
		l, err := a.Claim(ctx, "h3", "run-2", func(bool) {})
		older <- result{l, err}
	}()
	waitAsk()
	go func() {
		l, err := b.Claim(ctx, "h3", "run-3", func(bool) {})
		newer <- result{l, err}
	}()
	waitAsk()
	wait(t, holder.stopped, "holder stopped")
	holderLease.Release()
	for _, c := range []struct {
		name string
		ch   chan result
		want error
	}{{"older", older, conversation.ErrOvertaken}, {"newer", newer, nil}} {
		select {
		case r := <-c.ch:
			if !errors.Is(r.err, c.want) {
				t.Fatalf("%s claim: %v, want %v", c.name, r.err, c.want)
			}
			if r.lease != nil {
				r.lease.Release()
			}
		case <-time.After(hangGuard):
			t.Fatalf("%s claim did not return", c.name)
		}
	}
}

// Many turns on two instances claiming one history never run at once.
func TestOneTurnAtATime(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := instance(t, srv, "A")
	b, _ := instance(t, srv, "B")
	var inside, most, ran, overtaken atomic.Int32
	var wg sync.WaitGroup
	// Four clients, two on each instance, each sending turn after turn.
	for w := range 4 {
		c := a
		if w%2 == 1 {
			c = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				tt := newTurn()
				l, err := c.Claim(context.Background(), "h4", fmt.Sprintf("run-%d-%d", w, i), tt.stop)
				if errors.Is(err, conversation.ErrOvertaken) {
					overtaken.Add(1)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				ran.Add(1)
				// The turn runs until it is taken over, or ends on its
				// own (the last ones are not taken over).
				select {
				case <-tt.stopped:
				case <-time.After(20 * time.Millisecond):
				}
				inside.Add(-1)
				l.Release()
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d turns ran in the history at once", most.Load())
	}
	t.Logf("%d turns ran, %d were overtaken while waiting", ran.Load(), overtaken.Load())
	if ran.Load() < 2 {
		t.Fatalf("only %d of 40 turns ran: no history changed hands", ran.Load())
	}
}

// An instance that dies mid-turn (no release, no renewal) leaves a lease
// that expires: another instance then gets the history.
func TestDeadInstanceLeaseExpires(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := instance(t, srv, "A")
	b, _ := instance(t, srv, "B")
	claim(t, b, "h5", "run-dead", newTurn())
	spy := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
	defer spy.Close()
	// How long the lease has left when its instance dies: the claim
	// below must wait about that long.
	left, err := spy.PTTL(context.Background(), leasePrefix+"h5").Result()
	if err != nil || left <= 0 {
		t.Fatalf("the held lease's time to live: %s, %v", left, err)
	}
	killed := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	tt := newTurn()
	lease := claim(t, a, "h5", "run-next", tt)
	waited := time.Since(killed)
	t.Logf("history free again %s after its instance died (coord.lease %s, %s of it left)", waited.Round(time.Millisecond), testLease, left)
	if waited < left/2 {
		t.Fatalf("history claimed after %s: the dead instance's lease (%s left) was not waited for", waited, left)
	}
	lease.Release()
}

// redis-server restarted (empty) mid-turn: the turn keeps its lease (set
// again at the next renewal), stops reach it again, and new claims work.
func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	a, aLog := instance(t, srv, "A")
	b, bLog := instance(t, srv, "B")
	tt := newTurn()
	lease := claim(t, b, "h6", "run-long", tt)

	srv.Stop()
	// The turn goes on; its renewals fail and are retried.
	bLog.waitFor("could not renew a turn's lease; retrying", 1)
	// A turn that starts meanwhile waits for Redis.
	later := make(chan error, 1)
	go func() {
		l, err := a.Claim(context.Background(), "h7", "run-during", func(bool) {})
		if err == nil {
			l.Release()
		}
		later <- err
	}()
	aLog.waitFor("could not claim a history; retrying", 1)
	srv.Start()
	bLog.waitFor("turn's lease renewed again", 1)
	// The turn's renewal after the restart sets its lease again.
	wait(t, leaseSet(t, srv, "h6"), "lease set again after the restart")
	// B listens again (both channels): the stop goes by message.
	bLog.waitFor("subscribed", 2)

	stopped := make(chan bool, 1)
	go func() {
		s, err := a.Stop(context.Background(), "h6")
		if err != nil {
			t.Error(err)
		}
		stopped <- s
	}()
	wait(t, tt.stopped, "stop after the restart reached the turn")
	lease.Release()
	if !<-stopped {
		t.Fatal("stop after the restart found no turn")
	}
	l := claim(t, a, "h6", "run-after", newTurn())
	l.Release()
	select {
	case err := <-later:
		if err != nil {
			t.Fatalf("a claim made while Redis was down: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("a claim made while Redis was down did not return")
	}
}

// leaseSet returns a channel closed once history's lease key exists. It
// waits on keyspace events, not time.
func leaseSet(t testing.TB, srv *redistest.Server, history string) <-chan struct{} {
	t.Helper()
	ctx := context.Background()
	c, sub := keyspaceEvents(t, srv, leasePrefix+history, "K$")
	done := make(chan struct{})
	go func() {
		defer sub.Close()
		if n, err := c.Exists(ctx, leasePrefix+history).Result(); err == nil && n == 1 {
			close(done)
			return
		}
		for m := range sub.Channel() {
			if m.Payload == "set" {
				close(done)
				return
			}
		}
	}()
	return done
}

// keyspaceEvents subscribes to the events of key that flags (Redis's
// notify-keyspace-events) turn on, and returns the client too.
func keyspaceEvents(t testing.TB, srv *redistest.Server, key, flags string) (*redis.Client, *redis.PubSub) {
	t.Helper()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
	t.Cleanup(func() { c.Close() })
	if err := c.ConfigSet(ctx, "notify-keyspace-events", flags).Err(); err != nil {
		t.Fatal(err)
	}
	sub := c.Subscribe(ctx, "__keyspace@0__:"+key)
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	return c, sub
}

// A stop whose message the holder missed (it was not listening when it
// was published) is still read from its key, at the next renewal.
func TestStopByKeyWhenTheMessageIsMissed(t *testing.T) {
	srv := redistest.Start(t)
	b, _ := instance(t, srv, "B")
	tt := newTurn()
	lease := claim(t, b, "h8", "run-deaf", tt)
	defer lease.Release()
	spy := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
	defer spy.Close()
	ctx := context.Background()
	holder, err := spy.Get(ctx, leasePrefix+"h8").Result()
	if err != nil {
		t.Fatal(err)
	}
	// What askStop does, minus the message.
	if err := spy.Set(ctx, stopPrefix+"h8", holder+"\n"+reasonStop, testLease).Err(); err != nil {
		t.Fatal(err)
	}
	wait(t, tt.stopped, "the turn read the stop from its key")
	if tt.takenOver.Load() {
		t.Fatal("a stop was told as a take-over")
	}
}

// A turn that does not end within coord.wait makes a claim fail with an
// error that names the bound.
func TestClaimWaitBound(t *testing.T) {
	srv := redistest.Start(t)
	b, _ := instance(t, srv, "B")
	cfg := testConfig(srv.URL())
	cfg.Wait = 2 * testLease
	a, err := NewRedis(context.Background(), cfg, slog.New(newLogWatch(t, "A")))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	stuck := newTurn() // it is told to stop, and never ends
	lease := claim(t, b, "h9", "run-stuck", stuck)
	defer lease.Release()
	_, err = a.Claim(context.Background(), "h9", "run-waiting", func(bool) {})
	if err == nil || !strings.Contains(err.Error(), "did not end within coord.wait") {
		t.Fatalf("claim of a history whose turn does not end: %v", err)
	}
	wait(t, stuck.stopped, "the stuck turn was asked to stop")
	if _, err := a.Stop(context.Background(), "h9"); err == nil || !strings.Contains(err.Error(), "did not end within coord.wait") {
		t.Fatalf("stop of a turn that does not end: %v", err)
	}
}

// Redis unreachable at start: a clear error naming the address.
func TestUnreachableAtStart(t *testing.T) {
	srv := redistest.Start(t)
	url := srv.URL()
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err := NewRedis(ctx, testConfig(url), nil)
	if err == nil || !strings.Contains(err.Error(), "coord: redis at 127.0.0.1:") {
		t.Fatalf("NewRedis with redis-server stopped: %v", err)
	}
}

// BenchmarkClaimRelease measures what coordination adds to a turn in a
// free history: its claim (before its first words) and its release.
func BenchmarkClaimRelease(b *testing.B) {
	srv := redistest.Start(b)
	r, _ := instance(b, srv, "A")
	for _, c := range []struct {
		name string
		c    conversation.Coordinator
	}{{"redis", r}, {"local", conversation.NewLocalCoordinator()}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				l, err := c.c.Claim(ctx, "bench", fmt.Sprint("run-", i), func(bool) {})
				if err != nil {
					b.Fatal(err)
				}
				l.Release()
			}
		})
	}
}

// TestStopRightAfterRedisRestart: a Redis without persistence restarts and
// loses a running turn's lease; a stop sent at once waits until the
// turn's instance has set it again, and stops the turn. A stop for an
// idle history then still finds nothing.
func TestStopRightAfterRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	a, aLog := instance(t, srv, "A")
	b, _ := instance(t, srv, "B")
	tt := newTurn()
	lease := claim(t, b, "h9", "run-across", tt)
	srv.Stop()
	srv.Start()
	stopped := make(chan bool, 1)
	go func() {
		s, err := a.Stop(context.Background(), "h9")
		if err != nil {
			t.Error(err)
		}
		stopped <- s
	}()
	wait(t, tt.stopped, "a stop sent right after the restart reached the turn")
	lease.Release()
	if !<-stopped {
		t.Fatal("a stop sent right after the restart found no turn")
	}
	aLog.waitFor("subscribed", 2)
	if s, err := a.Stop(context.Background(), "idle"); err != nil || s {
		t.Fatalf("stop of an idle history after the restart: %v, %v", s, err)
	}
}
