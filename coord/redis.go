package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"koe/conversation"
)

// Keys and channels in Redis. History ids are letters, digits, '_', '-'
// and '.', so they need no quoting.
const (
	leasePrefix = "koe:coord:lease:" // the running turn's token, with an expiry
	stopPrefix  = "koe:coord:stop:"  // a stop for a token: "token\nreason", short-lived
	wantPrefix  = "koe:coord:want:"  // the newest claim's token
	chStop      = "koe:coord:stop"   // "history\ntoken\nreason"
	chReleased  = "koe:coord:released"

	reasonStop = "stop"
	reasonTake = "take"
)

// retryEvery paces the retries of a claim or a stop while Redis cannot be
// reached (go-redis retries each command a few times first).
const retryEvery = 200 * time.Millisecond

// acquire: KEYS lease, want, this instance's heartbeat; ARGV token,
// lease ms, "1" to record the claim as the newest, its expiry ms,
// heartbeat ms, heartbeat value, heartbeat key prefix. {1} acquired; {2,
// holder} taken over from holder, whose instance's heartbeat is gone
// while Redis has been up for two heartbeats (see heartbeat.go); {-1} a
// newer claim wants the history; {0, holder, pttl, recheck} another turn
// holds it: its lease expires in pttl, and its instance's heartbeat
// cannot be missed before recheck (ms).
var acquire = redis.NewScript(`
if ARGV[3] == '1' then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[4])
end
local w = redis.call('GET', KEYS[2])
if w and w ~= ARGV[1] then
  return {-1, '', 0, 0}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('SET', KEYS[3], ARGV[6], 'PX', ARGV[5])
  return {1, ARGV[1], 0, 0}
end
local cur = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local inst = string.match(cur, '^([^/]+)/.*/hb$')
if not inst then
  return {0, cur, pttl, pttl}
end
local beat = redis.call('PTTL', ARGV[7] .. inst)
if beat >= 0 then
  return {0, cur, pttl, beat}
elseif beat == -1 then
  return {0, cur, pttl, pttl}
end
local up = (tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)')) or 0) * 1000
if up < 2 * tonumber(ARGV[5]) then
  return {0, cur, pttl, 2 * tonumber(ARGV[5]) - up}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SET', KEYS[3], ARGV[6], 'PX', ARGV[5])
return {2, cur, 0, 0}
`)

// renew: KEYS lease, stop, this instance's heartbeat; ARGV token, lease
// ms, channel, history, heartbeat ms, heartbeat value. {1, stop} renewed
// (or set again when it had gone: Redis lost it, nobody else took it; a
// stop waiting for it is woken), with the instance's heartbeat; {0, ”}
// another turn holds the history.
var renew = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], ARGV[4])
elseif cur ~= ARGV[1] then
  return {0, ''}
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
redis.call('SET', KEYS[3], ARGV[6], 'PX', ARGV[5])
local s = redis.call('GET', KEYS[2])
if s == false then s = '' end
return {1, s}
`)

// upSince: KEYS up. {since, now} in Redis's milliseconds: since is when
// koe first found this Redis without its mark, that is when it started
// with nothing or lost its data (set now if it is so now).
var upSince = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local since = tonumber(redis.call('GET', KEYS[1]))
if not since then
  redis.call('SET', KEYS[1], now)
  since = now
end
return {since, now}
`)

// upKey marks a Redis that koe has known since the time it holds.
const upKey = "koe:coord:up"

// release: KEYS lease; ARGV token, channel, history. Deletes the lease
// only if it is still this token's and tells the waiters.
var release = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
`)

// stopFoundDead is logged when a stop finds the turn it would stop gone
// with its instance.
const stopFoundDead = "a stop found the turn's instance dead (its heartbeat expired); its lease is cleared"

// peek: KEYS lease; ARGV heartbeat ms, heartbeat key prefix, channel,
// history. {holder or ”, pttl, cleared, the cleared holder}. A lease whose instance's
// heartbeat is gone (while Redis has been up for two heartbeats, as in
// acquire) holds a turn that no longer runs: it is deleted, the waiters
// are told, and cleared is 1.
var peek = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then return {'', 0, 0, ''} end
local pttl = redis.call('PTTL', KEYS[1])
local inst = string.match(cur, '^([^/]+)/.*/hb$')
if not inst or redis.call('EXISTS', ARGV[2] .. inst) == 1 then
  return {cur, pttl, 0, ''}
end
local up = (tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)')) or 0) * 1000
if up < 2 * tonumber(ARGV[1]) then
  return {cur, pttl, 0, ''}
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return {'', 0, 1, cur}
`)

// RedisCoordinator is a conversation.Coordinator shared through Redis by
// every koe instance that uses the same server.
//
// A turn holds its history by a lease key (SET NX with an expiry) that a
// goroutine of the turn renews every third of coord.lease, and that the
// turn deletes when it ends, only if it is still its own. A claim of a
// held history asks the holder to stop and waits for its release, or for
// the lease to expire, or takes it over at once when the holder's instance
// died (its heartbeat expired: heartbeat.go). Stops go by PUBLISH to
// every instance, and by a short-lived key that the holder reads when it
// (re)subscribes and at every renewal, so one sent while it was not
// listening is not lost.
type RedisCoordinator struct {
	*conn                  // its goroutines: the subscriber, the renewals, the heartbeat
	lease, wait, heartbeat time.Duration
	instance               string
	name                   string // Config.Name
	beatKey, beatValue     string
	beatKick               chan struct{} // refresh the heartbeat now
	pendingMax             int
	log                    *slog.Logger
	obs                    observers

	mu      sync.Mutex
	held    map[string]*redisLease // this instance's leases, by history
	waiters map[string]map[chan struct{}]struct{}
	pending map[string]pendingRelease // releases to retry, by token (pending.go)
}

var _ conversation.Coordinator = (*RedisCoordinator)(nil)

// NewRedis connects to c.RedisURL and subscribes to the stop and release
// channels. It fails if Redis cannot be reached now.
func NewRedis(ctx context.Context, c Config, log *slog.Logger) (*RedisCoordinator, error) {
	if log == nil {
		log = slog.Default()
	}
	// Subscribed once both channels are confirmed; nothing is held or
	// awaited yet, so messages before that do not matter.
	cn, err := connect(ctx, c.RedisURL, chStop, chReleased)
	if err != nil {
		return nil, err
	}
	instance := newInstanceID()
	r := &RedisCoordinator{
		conn: cn, lease: c.Lease, wait: c.Wait, heartbeat: min(c.Heartbeat, c.Lease),
		instance: instance, name: c.Name, beatKey: beatPrefix + instance, beatValue: beatValue(c.Name),
		beatKick: make(chan struct{}, 1), pendingMax: c.PendingReleases,
		log:  log.With("coord_instance", instance),
		held: map[string]*redisLease{}, waiters: map[string]map[chan struct{}]struct{}{},
		pending: map[string]pendingRelease{},
	}
	cn.client.AddHook(roundTrips{&r.obs})
	// Alive before its first claim: a lease is never set without it.
	if err := r.refreshBeat(ctx); err != nil {
		_ = cn.close(nil)
		return nil, fmt.Errorf("coord: %w", err)
	}
	r.receive(r.onSubscribed, r.onMessage)
	r.wg.Add(1)
	go r.beat()
	r.markUp(ctx)
	return r, nil
}

// markUp notes when this Redis started with nothing or lost its data, if
// nobody has: a stop that finds no lease soon after waits for the running
// turns to set theirs again.
func (r *RedisCoordinator) markUp(ctx context.Context) {
	if err := upSince.Run(ctx, r.client, []string{upKey}).Err(); err != nil {
		r.log.Debug("could not mark redis as known", "err", err)
	}
}

// Ping checks that Redis answers (for readiness checks).
func (r *RedisCoordinator) Ping(ctx context.Context) error {
	return r.client.Ping(ctx).Err()
}

// Close stops listening, renewing and keeping the heartbeat, deletes the
// heartbeat and closes the connection. Leases still held (turns a
// shutdown could not end in time) are not released, but with the
// heartbeat gone the next claim of their histories takes them over at
// once instead of waiting out coord.heartbeat.
func (r *RedisCoordinator) Close() error { return r.closeThen(nil, r.endBeat) }

// onSubscribed: go-redis subscribed again after a connection loss; the
// waiters look again and the holders read their stop keys, for what was
// published while nobody listened.
func (r *RedisCoordinator) onSubscribed(m *redis.Subscription) {
	r.log.Debug("subscribed", "channel", m.Channel)
	r.resync()
	r.markUp(r.ctx)
}

// onMessage dispatches stop and release messages.
func (r *RedisCoordinator) onMessage(m *redis.Message) {
	switch m.Channel {
	case chStop:
		r.onStop(m.Payload)
	case chReleased:
		r.wake(m.Payload)
	}
}

func (r *RedisCoordinator) onStop(payload string) {
	history, rest, _ := strings.Cut(payload, "\n")
	token, reason, _ := strings.Cut(rest, "\n")
	r.mu.Lock()
	l := r.held[history]
	r.mu.Unlock()
	if l != nil && l.token == token {
		l.fire(reason == reasonTake)
	}
}

// resync wakes every waiter and renews every held lease at once: Redis
// may have lost them (a restart without persistence), and the renewal
// sets them again and reads their stop keys. The heartbeat is set again
// too, and the releases that failed meanwhile are retried.
func (r *RedisCoordinator) resync() {
	r.mu.Lock()
	wakes := []chan struct{}{r.beatKick}
	for _, l := range r.held {
		wakes = append(wakes, l.kick)
	}
	for _, ws := range r.waiters {
		for w := range ws {
			wakes = append(wakes, w)
		}
	}
	r.mu.Unlock()
	for _, w := range wakes {
		notify(w)
	}
}

func notify(w chan struct{}) {
	select {
	case w <- struct{}{}:
	default:
	}
}

func (r *RedisCoordinator) wake(history string) {
	r.mu.Lock()
	var wakes []chan struct{}
	for w := range r.waiters[history] {
		wakes = append(wakes, w)
	}
	r.mu.Unlock()
	for _, w := range wakes {
		notify(w)
	}
}

// addWaiter returns a channel that is signalled when history may have
// been released; the caller removes it.
func (r *RedisCoordinator) addWaiter(history string) chan struct{} {
	w := make(chan struct{}, 1)
	r.mu.Lock()
	if r.waiters[history] == nil {
		r.waiters[history] = map[chan struct{}]struct{}{}
	}
	r.waiters[history][w] = struct{}{}
	r.mu.Unlock()
	return w
}

func (r *RedisCoordinator) removeWaiter(history string, w chan struct{}) {
	r.mu.Lock()
	delete(r.waiters[history], w)
	if len(r.waiters[history]) == 0 {
		delete(r.waiters, history)
	}
	r.mu.Unlock()
}

// askStop asks the holder token of history to stop: a key it reads when
// it missed the message, and the message.
func (r *RedisCoordinator) askStop(ctx context.Context, history, token, reason string) error {
	_, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, stopPrefix+history, token+"\n"+reason, r.lease)
		p.Publish(ctx, chStop, history+"\n"+token+"\n"+reason)
		return nil
	})
	return err
}

// Claim implements conversation.Coordinator.
func (r *RedisCoordinator) Claim(ctx context.Context, history, turn string, stop func(takenOver bool)) (conversation.Lease, error) {
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	token := r.leaseToken(turn, hex.EncodeToString(nonce[:]))
	ctx, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	wake := r.addWaiter(history)
	defer r.removeWaiter(history, wake)
	// Registered as this instance's once it holds the lease; hold then
	// reads a stop that may have been published before that.
	l := &redisLease{r: r, history: history, token: token, stop: stop, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	first, asked := "1", ""
	var lastErr error
	var waited claimWait
	for {
		res, err := acquire.Run(ctx, r.client, []string{leasePrefix + history, wantPrefix + history, r.beatKey},
			token, r.lease.Milliseconds(), first, (r.wait + r.lease).Milliseconds(),
			r.heartbeat.Milliseconds(), r.beatValue, beatPrefix).Slice()
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				r.waitEnded(&waited, history, WaitStopped)
				return nil, r.claimFailed(ctx, history, asked, err)
			}
			lastErr = err
			r.log.Warn("could not claim a history; retrying", "history_uid", history, "err", err)
			wait = retryEvery
		case toInt(res[0]) == 1:
			l.renewed = time.Now()
			r.hold(l)
			r.waitEnded(&waited, history, waited.endedBy())
			return l, nil
		case toInt(res[0]) == 2:
			l.renewed = time.Now()
			r.hold(l)
			dead, _ := res[1].(string)
			r.log.Warn("took over the lease of a dead instance", "history_uid", history,
				"dead_instance", instanceOfLease(dead), "coord.heartbeat", r.heartbeat)
			r.obs.get().DeadInstanceTakeover()
			waited.look(dead)
			r.waitEnded(&waited, history, WaitTakenOver)
			return l, nil
		case toInt(res[0]) == -1:
			r.waitEnded(&waited, history, WaitStopped)
			return nil, conversation.ErrOvertaken
		default:
			first = ""
			holder, _ := res[1].(string)
			if p, ok := r.pendingOf(holder); ok {
				// A turn of this instance that ended while Redis was
				// away: release it now rather than wait for it.
				if _, err := r.retryRelease(ctx, p); err == nil {
					continue
				}
			}
			// Asked at every look: a request lost with a restarted
			// Redis is made again.
			if err := r.askStop(ctx, history, holder, reasonTake); err != nil {
				lastErr = err
				wait = retryEvery
				break
			}
			asked = holder
			waited.look(holder)
			// Woken by its release; else looks again at its expiry, or
			// when its instance's heartbeat could have expired (the
			// instance died).
			leaseLeft := time.Duration(toInt(res[2])) * time.Millisecond
			recheck := time.Duration(toInt(res[3]))*time.Millisecond + time.Millisecond
			if leaseLeft <= 0 {
				leaseLeft = r.lease
			}
			wait = min(leaseLeft, recheck)
			waited.onExpiry = leaseLeft <= recheck
		}
		woken, err := pauseWoken(ctx, wake, wait)
		if err != nil {
			if lastErr == nil {
				lastErr = err
			}
			r.waitEnded(&waited, history, WaitStopped)
			return nil, r.claimFailed(ctx, history, asked, lastErr)
		}
		waited.timedOut = !woken
	}
}

// pause returns when wake fires or after d, or with ctx's error when it
// ends first.
func pause(ctx context.Context, wake <-chan struct{}, d time.Duration) error {
	_, err := pauseWoken(ctx, wake, d)
	return err
}

// pauseWoken is pause that tells whether wake fired.
func pauseWoken(ctx context.Context, wake <-chan struct{}, d time.Duration) (bool, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-wake:
		return true, nil
	case <-timer.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (r *RedisCoordinator) claimFailed(ctx context.Context, history, holder string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && holder != "" {
		return fmt.Errorf("history %s: the turn running there (%s) did not end within coord.wait (%s)", history, holder, r.wait)
	}
	return fmt.Errorf("history %s: could not claim it within coord.wait (%s): %w", history, r.wait, err)
}

func toInt(v any) int64 {
	n, _ := v.(int64)
	return n
}

// hold makes l this instance's lease of its history, starts its renewals
// and reads a stop that may have come before it listened.
func (r *RedisCoordinator) hold(l *redisLease) {
	r.mu.Lock()
	r.held[l.history] = l
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(r.ctx)
	l.cancel = cancel
	r.wg.Add(1)
	go l.renew(ctx)
	if v, err := r.client.Get(ctx, stopPrefix+l.history).Result(); err == nil {
		l.checkStop(v)
	}
}

// Stop implements conversation.Coordinator.
func (r *RedisCoordinator) Stop(ctx context.Context, history string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	wake := r.addWaiter(history)
	defer r.removeWaiter(history, wake)
	holder, asked := "", false
	for {
		res, err := peek.Run(ctx, r.client, []string{leasePrefix + history},
			r.heartbeat.Milliseconds(), beatPrefix, chReleased, history).Slice()
		var wait time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return false, r.stopFailed(history, holder, asked, err)
			}
			r.log.Warn("could not stop a turn; retrying", "history_uid", history, "err", err)
			wait = retryEvery
		} else {
			cur, _ := res[0].(string)
			if toInt(res[2]) == 1 {
				dead, _ := res[3].(string)
				r.log.Info(stopFoundDead,
					"history_uid", history, "holder_instance", instanceOfLease(dead))
				r.obs.get().DeadInstanceTakeover()
			}
			switch {
			case !asked && cur == "":
				// Unless Redis lost the leases lately and the turns'
				// instances have not set them again yet.
				settle := r.settling(ctx)
				if settle <= 0 {
					return false, nil
				}
				if err := pause(ctx, wake, settle); err != nil {
					return false, r.stopFailed(history, holder, asked, err)
				}
				continue
			case asked && cur != holder:
				return true, nil
			}
			// Asked at every look: a request lost with a restarted
			// Redis is made again.
			holder = cur
			if err := r.askStop(ctx, history, holder, reasonStop); err != nil {
				wait = retryEvery
			} else {
				asked = true
				wait = time.Duration(toInt(res[1])) * time.Millisecond
				if wait <= 0 {
					wait = r.lease
				}
				// A holder that dies now never answers: look again once
				// its heartbeat could have expired.
				wait = min(wait, r.heartbeat)
			}
		}
		if err := pause(ctx, wake, wait); err != nil {
			return false, r.stopFailed(history, holder, asked, err)
		}
	}
}

// Held implements conversation.Coordinator: whether the history's lease
// is set, within coord.wait.
func (r *RedisCoordinator) Held(ctx context.Context, history string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	n, err := r.client.Exists(ctx, leasePrefix+history).Result()
	if err != nil {
		return false, fmt.Errorf("history %s: read its lease: %w", history, err)
	}
	return n > 0, nil
}

// settling is how long, after Redis started with nothing or lost its data,
// a running turn's lease may still be missing: every live instance sets
// its turns' leases again within coord.lease. Zero when that is past (or
// unknown: Redis cannot say).
func (r *RedisCoordinator) settling(ctx context.Context) time.Duration {
	res, err := upSince.Run(ctx, r.client, []string{upKey}).Slice()
	if err != nil || len(res) != 2 {
		return 0
	}
	left := time.Duration(toInt(res[0])+r.lease.Milliseconds()-toInt(res[1])) * time.Millisecond
	return max(left, 0)
}

func (r *RedisCoordinator) stopFailed(history, holder string, asked bool, err error) error {
	if asked {
		return fmt.Errorf("stop history %s: the turn running there (%s) did not end within coord.wait (%s)", history, holder, r.wait)
	}
	return fmt.Errorf("stop history %s: could not reach redis within coord.wait (%s): %w", history, r.wait, err)
}

// redisLease is a turn's hold on its history.
type redisLease struct {
	r       *RedisCoordinator
	history string
	token   string
	stop    func(takenOver bool)
	renewed time.Time // the last time Redis set or renewed it (the renewals' goroutine's)
	fired   sync.Once
	cancel  context.CancelFunc
	kick    chan struct{} // renew now
	done    chan struct{} // closed when the renewals ended
	once    sync.Once
}

func (l *redisLease) fire(takenOver bool) {
	l.fired.Do(func() { l.stop(takenOver) })
}

// checkStop reads a stop key's value: a stop for this lease stops it.
func (l *redisLease) checkStop(v string) {
	token, reason, _ := strings.Cut(v, "\n")
	if token == l.token {
		l.fire(reason == reasonTake)
	}
}

// renew keeps the lease while the turn runs, every third of coord.lease
// and at once when the subscription comes back after a connection loss.
// A renewal that fails (Redis away) is logged and tried again at the next
// tick: the turn goes on. If the lease expired meanwhile (or Redis lost
// it), it is set again, unless another turn took the history: this one is
// then stopped as taken over.
func (l *redisLease) renew(ctx context.Context) {
	defer l.r.wg.Done()
	defer close(l.done)
	tick := time.NewTicker(l.r.lease / 3)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-l.kick:
		}
		res, err := renew.Run(ctx, l.r.client, []string{leasePrefix + l.history, stopPrefix + l.history, l.r.beatKey},
			l.token, l.r.lease.Milliseconds(), chReleased, l.history, l.r.heartbeat.Milliseconds(), l.r.beatValue).Slice()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failing = true
			l.r.log.Warn("could not renew a turn's lease; retrying", "history_uid", l.history, "err", err)
			continue
		}
		if failing {
			failing = false
			l.r.log.Info("turn's lease renewed again", "history_uid", l.history)
		}
		if toInt(res[0]) == 1 {
			l.renewed = time.Now()
		}
		if toInt(res[0]) == 0 {
			l.r.log.Warn("another turn took the history while this turn's lease could not be renewed; stopping this turn", "history_uid", l.history)
			l.fire(true)
			return
		}
		if s, _ := res[1].(string); s != "" {
			l.checkStop(s)
		}
	}
}

// Release implements conversation.Lease: it deletes the lease if it is
// still this turn's and tells the waiting instances. If Redis cannot be
// reached, the release is kept and tried again once it answers (see
// pending.go); the lease expires on its own within coord.lease anyway.
func (l *redisLease) Release() {
	l.once.Do(func() {
		l.cancel()
		<-l.done
		r := l.r
		r.mu.Lock()
		if r.held[l.history] == l {
			delete(r.held, l.history)
		}
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), r.lease)
		defer cancel()
		err := release.Run(ctx, r.client, []string{leasePrefix + l.history}, l.token, chReleased, l.history).Err()
		if err == nil {
			return
		}
		if r.keepRelease(l.history, l.token, l.renewed.Add(r.lease)) {
			r.log.Warn("could not release a turn's lease; released once redis answers again", "history_uid", l.history, "err", err)
			return
		}
		r.obs.get().ReleaseRetried(RetryDropped)
		r.log.Warn("could not release a turn's lease, and coord.pending_releases are waiting for redis already; it expires within coord.lease",
			"history_uid", l.history, "coord.lease", r.lease, "coord.pending_releases", r.pendingMax, "err", err)
	})
}
