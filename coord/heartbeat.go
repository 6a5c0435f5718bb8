package coord

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// Each instance keeps a short-lived key in Redis (coord.heartbeat, set
// again every third of it) while it runs, and every lease names its
// instance. A claim that finds a history held by an instance whose key is
// gone takes the lease over at once (in the acquire script) instead of
// waiting up to coord.lease for it to expire: the instance died. An
// instance that is alive but slow keeps its key, and its turns keep
// coord.lease.
//
// Every script that writes a lease also sets its instance's heartbeat, so
// a lease that a Redis without persistence lost and a renewal set again
// never stands without one. A Redis with persistence keeps the leases
// across a restart but may come back with heartbeats that expired while it
// was down; no lease is taken over before Redis has been up for twice
// coord.heartbeat: every live instance sets its key again within one
// (a third of it to its next refresh, and go-redis's own wait of up to a
// second before it dials again after failed dials), the second is slack
// for a loaded machine.
const (
	beatPrefix = "koe:coord:instance:" // an instance's heartbeat: its host, with an expiry of coord.heartbeat
	// beatMark ends the tokens of leases whose instance keeps a
	// heartbeat. Those of an older koe lack it: their leases are never
	// taken over (they have no heartbeat to miss), only waited for.
	beatMark = "/hb"
)

// beatFailing is logged when the heartbeat cannot be refreshed.
const beatFailing = "could not refresh this instance's heartbeat; retrying (other instances take its turns' histories over if it stays away longer than coord.heartbeat)"

// leaseToken is a turn's token: its instance, the turn, a nonce, and the
// mark of an instance with a heartbeat. The acquire script reads the
// instance back from it.
func (r *RedisCoordinator) leaseToken(turn, nonce string) string {
	return r.instance + "/" + turn + "/" + nonce + beatMark
}

// instanceOfLease is the instance in a lease token ("" if none).
func instanceOfLease(token string) string {
	id, _, ok := strings.Cut(token, "/")
	if !ok {
		return ""
	}
	return id
}

// beatValue is what an instance's heartbeat key holds, for an operator
// looking at Redis: the instance's name (the top-level key instance, as
// on its log lines and metrics) and which machine and process it is.
func beatValue(name string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	if name == "" {
		return fmt.Sprintf("%s pid %d", host, os.Getpid())
	}
	return fmt.Sprintf("%s on %s pid %d", name, host, os.Getpid())
}

// refreshBeat sets this instance's heartbeat key again.
func (r *RedisCoordinator) refreshBeat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.heartbeat)
	defer cancel()
	if err := r.client.Set(ctx, r.beatKey, r.beatValue, r.heartbeat).Err(); err != nil {
		return fmt.Errorf("set the instance's heartbeat %s: %w", r.beatKey, err)
	}
	return nil
}

// endBeat deletes this instance's heartbeat, once beat has stopped: the
// instance is gone. Best effort: unanswered, the key expires within
// coord.heartbeat anyway.
func (r *RedisCoordinator) endBeat() {
	ctx, cancel := context.WithTimeout(context.Background(), r.heartbeat)
	defer cancel()
	if err := r.client.Del(ctx, r.beatKey).Err(); err != nil {
		r.log.Debug("could not delete the instance's heartbeat; it expires within coord.heartbeat", "err", err)
	}
}

// beat keeps this instance's heartbeat, every third of coord.heartbeat
// and at once when the subscription comes back after a connection loss;
// once Redis answers it, it retries the releases that failed meanwhile.
func (r *RedisCoordinator) beat() {
	defer r.wg.Done()
	tick := time.NewTicker(r.heartbeat / 3)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		case <-r.beatKick:
		}
		if err := r.refreshBeat(r.ctx); err != nil {
			if r.ctx.Err() != nil {
				return
			}
			if !failing {
				r.log.Warn(beatFailing, "coord.heartbeat", r.heartbeat, "err", err)
			}
			failing = true
			continue
		}
		if failing {
			failing = false
			r.log.Info("instance heartbeat refreshed again")
		}
		r.retryReleases(r.ctx)
	}
}
