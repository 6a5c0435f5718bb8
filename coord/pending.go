package coord

import (
	"context"
	"time"
)

// A release that fails because Redis cannot be reached is kept and tried
// again once Redis answers (the heartbeat's next success, which a
// reconnection brings at once): a Redis that restarts with its data
// (appendonly yes) still holds the lease, and the next turn in that
// history would otherwise wait for it to expire. The retry deletes the
// lease only if it is still the turn's. Kept releases are bounded
// (coord.pending_releases) and forgotten once their lease has expired
// anyway.

// pendingRelease is an ended turn's lease still to delete.
type pendingRelease struct {
	history string
	token   string
	until   time.Time // the lease has expired by then, released or not
}

// keepRelease keeps the release of l's lease for Redis's return; false if
// coord.pending_releases are kept already.
func (r *RedisCoordinator) keepRelease(history, token string, until time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) >= r.pendingMax {
		return false
	}
	r.pending[token] = pendingRelease{history: history, token: token, until: until}
	return true
}

// retryReleases tries the kept releases again, and forgets those done or
// expired. It stops at the first that fails to reach Redis: the rest wait
// for the next heartbeat.
func (r *RedisCoordinator) retryReleases(ctx context.Context) {
	r.mu.Lock()
	todo := make([]pendingRelease, 0, len(r.pending))
	for _, p := range r.pending {
		todo = append(todo, p)
	}
	r.mu.Unlock()
	for _, p := range todo {
		if _, err := r.retryRelease(ctx, p); err != nil {
			return
		}
	}
}

// retryRelease tries p once: done (the lease deleted, or no longer the
// turn's, or expired meanwhile) or an error from Redis, p kept.
func (r *RedisCoordinator) retryRelease(ctx context.Context, p pendingRelease) (released bool, err error) {
	if time.Now().After(p.until) {
		r.forgetRelease(p, RetryExpired)
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.heartbeat)
	defer cancel()
	n, err := release.Run(ctx, r.client, []string{leasePrefix + p.history}, p.token, chReleased, p.history).Int()
	if err != nil {
		return false, err
	}
	if n == 1 {
		r.log.Info("released an ended turn's lease once redis answered again", "history_uid", p.history)
		r.forgetRelease(p, RetryReleased)
		return true, nil
	}
	r.forgetRelease(p, RetryGone)
	return false, nil
}

func (r *RedisCoordinator) forgetRelease(p pendingRelease, result string) {
	r.mu.Lock()
	_, kept := r.pending[p.token]
	delete(r.pending, p.token)
	r.mu.Unlock()
	if kept {
		r.obs.get().ReleaseRetried(result)
	}
}

// pendingOf is the kept release of token, if any: a claim on this
// instance that finds its history held by it does it first.
func (r *RedisCoordinator) pendingOf(token string) (pendingRelease, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pending[token]
	return p, ok
}
