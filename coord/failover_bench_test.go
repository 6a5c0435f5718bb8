package coord

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"koe/testkit/redistest"
)

// failoverSessions is how many conversations a failover benchmark ends
// or kills at once.
const failoverSessions = 50

// benchInstance is an instance with the shipped coord settings.
func benchInstance(b *testing.B, url string) *RedisCoordinator {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Backend, cfg.RedisURL = Redis, url
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r, err := NewRedis(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	return r
}

// nextTurns claims every history on c at once and reports how long each
// claim took from since: the wait of each conversation's next turn.
func nextTurns(b *testing.B, c *RedisCoordinator, histories []string, since time.Time) {
	b.Helper()
	waits := make([]time.Duration, len(histories))
	var wg sync.WaitGroup
	for i, h := range histories {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Claim(context.Background(), h, "next", func(bool) {})
			waits[i] = time.Since(since)
			if err != nil {
				b.Error(err)
				return
			}
			l.Release()
		}()
	}
	wg.Wait()
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	b.ReportMetric(waits[len(waits)/2].Seconds(), "p50-s")
	b.ReportMetric(waits[len(waits)-1].Seconds(), "max-s")
	b.Logf("%d next turns: p50 %s, max %s", len(waits), waits[len(waits)/2].Round(time.Millisecond), waits[len(waits)-1].Round(time.Millisecond))
}

func sessions(prefix string) []string {
	out := make([]string, failoverSessions)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// BenchmarkNextTurnAfterRedisRestart: 50 conversations on instance B end
// their turns while Redis (appendonly yes) is down; Redis comes back, and
// each conversation's next turn is claimed on instance A at once. Run
// with -benchtime=1x: the numbers are the claims' waits from Redis's
// return, not ns/op.
func BenchmarkNextTurnAfterRedisRestart(b *testing.B) {
	for b.Loop() {
		srv := redistest.StartAOF(b)
		a := benchInstance(b, srv.URL())
		bb := benchInstance(b, srv.URL())
		hs := sessions("restart")
		var leases []interface{ Release() }
		for _, h := range hs {
			l, err := bb.Claim(context.Background(), h, "ending", func(bool) {})
			if err != nil {
				b.Fatal(err)
			}
			leases = append(leases, l)
		}
		srv.Stop()
		// The turns end at once, each on its own, as conversations do.
		var ended sync.WaitGroup
		for _, l := range leases {
			ended.Add(1)
			go func() {
				defer ended.Done()
				l.Release()
			}()
		}
		ended.Wait()
		srv.Start()
		nextTurns(b, a, hs, time.Now())
		srv.Stop()
	}
}

// BenchmarkNextTurnAfterInstanceKill: instance B runs a turn in each of 50
// conversations and dies (its connections to Redis close, nothing is
// released); their clients reconnect to instance A at once and claim
// their next turns. Redis has been up for a while, as in production. Run
// with -benchtime=1x.
func BenchmarkNextTurnAfterInstanceKill(b *testing.B) {
	for b.Loop() {
		srv := redistest.StartAOF(b)
		spy := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
		// A Redis up for less than two heartbeats holds take-overs back
		// (see heartbeat.go): wait until this one has been up longer.
		for {
			info, err := spy.Info(context.Background(), "server").Result()
			if err != nil {
				b.Fatal(err)
			}
			var up int
			for _, line := range strings.Split(info, "\n") {
				if n, _ := fmt.Sscanf(line, "uptime_in_seconds:%d", &up); n == 1 {
					break
				}
			}
			if up >= 5 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		_ = spy.Close()
		a := benchInstance(b, srv.URL())
		bb := benchInstance(b, srv.URL())
		hs := sessions("kill")
		for _, h := range hs {
			if _, err := bb.Claim(context.Background(), h, "running", func(bool) {}); err != nil {
				b.Fatal(err)
			}
		}
		killed := time.Now()
		_ = bb.Close()
		nextTurns(b, a, hs, killed)
		srv.Stop()
	}
}
