package coord

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Observer is told what an operator counts of the coordination of turns:
// how long claims waited for a history another turn held and why that
// wait ended, Redis's round trips, releases retried after Redis came
// back, and leases taken over from dead instances. app fills it with
// koe's metrics. Its methods are called on turns' paths and on the
// coordinator's goroutines: they must be quick and never block.
type Observer interface {
	// LeaseWait: a claim found its history held by another turn and
	// waited d; outcome is one of the Wait* values.
	LeaseWait(outcome string, d time.Duration)
	// RedisRoundTrip: one command (or pipeline) of the coordinator's was
	// answered by Redis after d.
	RedisRoundTrip(d time.Duration)
	// ReleaseRetried: a release that failed while Redis was unreachable
	// came to an end; result is one of the Retry* values.
	ReleaseRetried(result string)
	// DeadInstanceTakeover: a claim took a history's lease over from an
	// instance whose heartbeat had expired.
	DeadInstanceTakeover()
}

// How a claim's wait for a held history ended (Observer.LeaseWait).
const (
	WaitReleased  = "released"   // the turn there ended (asked to stop) and released it
	WaitExpired   = "expired"    // its lease expired: nobody renewed it
	WaitTakenOver = "taken_over" // its instance's heartbeat had expired: taken over at once
	WaitStopped   = "stopped"    // the claim ended without it: a newer turn, its caller gone, or coord.wait
)

// How a release kept for Redis's return ended (Observer.ReleaseRetried).
const (
	RetryReleased = "released" // done once Redis answered again
	RetryGone     = "gone"     // by then the lease was no longer the turn's (expired, or taken)
	RetryExpired  = "expired"  // Redis answered only after the lease had expired anyway
	RetryDropped  = "dropped"  // not kept: coord.pending_releases were waiting already
)

// slowClaim is a wait for a held history worth a log line: a user notices it.
const slowClaim = time.Second

type noObserver struct{}

func (noObserver) LeaseWait(string, time.Duration) {}
func (noObserver) RedisRoundTrip(time.Duration)    {}
func (noObserver) ReleaseRetried(string)           {}
func (noObserver) DeadInstanceTakeover()           {}

// observers holds the Observer that a coordinator reports to; it can be
// set after the coordinator started (app builds the metrics later).
type observers struct{ p atomic.Pointer[Observer] }

func (o *observers) set(obs Observer) {
	if obs == nil {
		obs = noObserver{}
	}
	o.p.Store(&obs)
}

func (o *observers) get() Observer {
	if p := o.p.Load(); p != nil {
		return *p
	}
	return noObserver{}
}

// Observe makes obs (nil: nothing) the coordinator's Observer.
func (r *RedisCoordinator) Observe(obs Observer) { r.obs.set(obs) }

// roundTrips is a go-redis hook that reports how long each of the
// coordinator's commands took to be answered. Commands that got no answer
// (Redis unreachable) are not round trips: their failures are logged.
type roundTrips struct{ obs *observers }

func (h roundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		if answered(err) {
			h.obs.get().RedisRoundTrip(time.Since(start))
		}
		return err
	}
}

func (h roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		if answered(err) {
			h.obs.get().RedisRoundTrip(time.Since(start))
		}
		return err
	}
}

// answered: Redis replied, with a value, nil or an error of its own.
func answered(err error) bool {
	var re redis.Error
	return err == nil || errors.As(err, &re)
}
