package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Keys and channels of elections in Redis. A name is the application's
// (live:<conf_uid> for a character's live chat).
const (
	holderPrefix = "koe:lead:holder:" // the leader's token, with an expiry of coord.lease
	knownPrefix  = "koe:lead:known:"  // exists while Redis remembers an election of the name
	sharedPrefix = "koe:lead:shared:" // a hash the successive leaders share
	replyPrefix  = "koe:lead:reply:"  // one answer to a forwarded request, short-lived
	chLeadFree   = "koe:lead:released"
	chLeadAsk    = "koe:lead:ask" // name \n token \n reply key \n request
)

// leadAcquire: KEYS holder, known; ARGV token, lease ms. {1, known} the
// lead is this token's (known: 1 if Redis remembered an earlier election,
// 0 if it did not: a first start, or a Redis that lost its data); {0,
// holder, pttl} another token holds it.
var leadAcquire = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local known = redis.call('EXISTS', KEYS[2])
  redis.call('SET', KEYS[2], '1')
  return {1, known, 0}
end
return {0, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
`)

// leadRenew: KEYS holder, known; ARGV token, lease ms. 1 renewed (or set
// again when Redis lost it: nobody else took it), 0 another token holds
// the lead.
var leadRenew = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
elseif cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  return 0
end
redis.call('SET', KEYS[2], '1')
return 1
`)

// leadRelease: KEYS holder; ARGV token, channel, name. Deletes the lead
// only if it is still this token's and tells the standing-by instances.
var leadRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
`)

// Role is an instance's part in an election.
type Role string

const (
	// RoleStandby: another instance leads, or none does yet.
	RoleStandby Role = "standby"
	// RoleStarting: this instance holds the lead but waits coord.lease
	// before it starts, because Redis had no record of an earlier election
	// (its first start, or a restart that lost its data): a leader elected
	// before that has then noticed and stopped.
	RoleStarting Role = "starting"
	// RoleLeader: this instance leads.
	RoleLeader Role = "leader"
)

// LeaderState is an election as one instance sees it.
type LeaderState struct {
	Role     Role
	Instance string // this instance
	Leader   string // the instance holding the lead as last seen; "" if none is known
}

// ErrNoLeader is Ask's error when no instance holds the lead.
var ErrNoLeader = errors.New("no instance leads")

// Leader elects, among the koe instances that share Redis, the one that
// runs a job only one of them may run at a time (a character's live
// chat).
//
// The lead is a key in Redis (SET NX with an expiry of coord.lease)
// holding the leader's token, which it renews every third of coord.lease
// and deletes when it stops (only if it is still its own), publishing that
// it did: the instances standing by try to take it then, and every third
// of coord.lease. A leader that cannot renew its lead for two thirds of
// coord.lease stops its job, a third of coord.lease before the lead can
// expire in Redis and be taken by another. When Redis has no record of an
// earlier election (it lost its data), a new leader waits coord.lease
// before it starts: a leader of before that has by then either renewed
// (finding the new token, it stops) or stopped on its own.
//
// Requests to the job (Ask) are forwarded to the leader by PUBLISH; it
// answers in a short-lived list the asker waits on.
type Leader struct {
	r     *RedisCoordinator
	name  string
	id    string // this instance: its name (or host name) and coordinator id
	lease time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	running bool
	role    Role
	token   string // the held lead's, "" when standing by
	holder  string // the leading instance as last seen
}

// NewLeader prepares an election of name among the instances sharing
// Redis; Run takes part in it.
func (r *RedisCoordinator) NewLeader(name string) *Leader {
	id := r.instance
	if r.name != "" {
		id = r.name + "/" + r.instance
	} else if host, err := os.Hostname(); err == nil && host != "" {
		id = host + "/" + r.instance
	}
	return &Leader{
		r: r, name: name, id: id, lease: r.lease, role: RoleStandby,
		log: r.log.With("lead", name),
	}
}

// State is the election as this instance sees it now.
func (l *Leader) State() LeaderState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LeaderState{Role: l.role, Instance: l.id, Leader: l.holder}
}

// term is one held lead.
type term struct {
	token string
	sent  time.Time // when the command that took it was sent
	known bool      // Redis remembered an earlier election
}

func newToken(id string) string {
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	return id + "/" + hex.EncodeToString(nonce[:])
}

// instanceOf is the instance part of a token.
func instanceOf(token string) string {
	if i := strings.LastIndexByte(token, '/'); i > 0 {
		return token[:i]
	}
	return token
}

// Run takes part in the election until ctx ends. Each time this instance
// is elected it calls lead with a context that ends when it must stop
// (the lead lost, or ctx ended); lead must then return promptly. A lead
// that returns on its own gives the lead up (another instance, or this
// one a third of coord.lease later, tries again). While lead runs, answer
// answers the requests other instances forward (Ask). Run returns once
// lead has returned and the lead is released.
func (l *Leader) Run(ctx context.Context, lead func(ctx context.Context), answer func(ctx context.Context, req []byte) ([]byte, error)) error {
	l.mu.Lock()
	if l.running {
		l.mu.Unlock()
		return fmt.Errorf("lead %s: Run is already running", l.name)
	}
	l.running = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.running = false
		l.mu.Unlock()
	}()

	// go-redis subscribes again after a lost connection, and so does this
	// subscription when Redis is away now.
	sub := l.r.client.Subscribe(ctx, chLeadFree, chLeadAsk)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		_ = sub.Close()
		wg.Wait()
	}()
	wake := make(chan struct{}, 1)
	subscribed := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.listen(ctx, sub, wake, subscribed, answer)
	}()
	// Campaign once requests can be heard.
	select {
	case <-subscribed:
	case <-ctx.Done():
		return nil
	}
	for {
		t, err := l.campaign(ctx, wake)
		if err != nil {
			return nil // ctx ended
		}
		if ended := l.hold(ctx, &wg, wake, t, lead); ended {
			// lead gave up on its own: let another instance try first.
			if pause(ctx, nil, l.lease/3) != nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// listen handles the election's messages: a release wakes the campaign, a
// (re)subscription renews a held lead at once, a request is answered if
// this instance leads.
func (l *Leader) listen(ctx context.Context, sub *redis.PubSub, wake, subscribed chan struct{}, answer func(context.Context, []byte) ([]byte, error)) {
	ch := sub.ChannelWithSubscriptions()
	var once sync.Once
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Channel == chLeadAsk {
					once.Do(func() { close(subscribed) })
				}
				// Back after a lost connection, a holder renews at once
				// (Redis may have lost its lead); one standing by waits
				// for its next try, so that a leader that is still there
				// sets its lead again first.
				l.mu.Lock()
				holding := l.token != ""
				l.mu.Unlock()
				if holding {
					notify(wake)
				}
			case *redis.Message:
				switch m.Channel {
				case chLeadFree:
					if m.Payload == l.name {
						notify(wake)
					}
				case chLeadAsk:
					l.onAsk(ctx, m.Payload, answer)
				}
			}
		}
	}
}

// campaign tries to take the lead until it does (or ctx ends): at once,
// when the lead is released, and every third of coord.lease (sooner if
// the held lead expires sooner).
func (l *Leader) campaign(ctx context.Context, wake <-chan struct{}) (term, error) {
	failing := false
	for {
		token := newToken(l.id)
		sent := time.Now()
		res, err := leadAcquire.Run(ctx, l.r.client, []string{holderPrefix + l.name, knownPrefix + l.name},
			token, l.lease.Milliseconds()).Slice()
		wait := l.lease / 3
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return term{}, ctx.Err()
			}
			if !failing {
				l.log.Warn("could not reach redis to take part in the election; retrying", "err", err)
			}
			failing = true
		case toInt(res[0]) == 1:
			return term{token: token, sent: sent, known: toInt(res[1]) == 1}, nil
		default:
			holder, _ := res[1].(string)
			l.standBy(instanceOf(holder))
			// Said once the leader is known again: whoever hears it
			// (a test, an operator) may look at the state.
			if failing {
				l.log.Info("redis answers the election again")
				failing = false
			}
			if left := time.Duration(toInt(res[2]))*time.Millisecond + time.Millisecond; left > 0 && left < wait {
				wait = left
			}
		}
		if err := pause(ctx, wake, wait); err != nil {
			return term{}, err
		}
	}
}

// standBy records that this instance stands by and that leader leads (""
// if unknown); it is logged when it changes.
func (l *Leader) standBy(leader string) {
	l.mu.Lock()
	changed := l.holder != leader || l.role != RoleStandby
	l.role, l.token, l.holder = RoleStandby, "", leader
	l.mu.Unlock()
	if changed {
		l.log.Info("standing by", "leader", leader)
	}
}

// renewal is the outcome of one renewal.
type renewal struct {
	sent time.Time
	held bool
	err  error
}

// hold keeps the lead of term t while ctx lasts and runs lead in it. It
// returns when the lead is lost, given up by lead (ended is then true) or
// ctx ends (the lead is then released). Renewals run in goroutines that
// wg owns, so that a Redis that does not answer cannot delay stopping.
func (l *Leader) hold(ctx context.Context, wg *sync.WaitGroup, wake <-chan struct{}, t term, lead func(context.Context)) (ended bool) {
	startAt := time.Now()
	role := RoleLeader
	if !t.known {
		startAt, role = t.sent.Add(l.lease), RoleStarting
		l.log.Info("this instance holds the lead; as redis had no record of an earlier leader, it starts after coord.lease so that such a leader has stopped",
			"coord.lease", l.lease)
	}
	l.mu.Lock()
	l.role, l.token, l.holder = role, t.token, l.id
	l.mu.Unlock()

	validUntil := t.sent.Add(l.lease)
	var stopLead context.CancelFunc
	var leadDone chan struct{} // nil until lead starts
	stop := func() {
		if stopLead != nil {
			stopLead()
			<-leadDone
			stopLead = nil
		}
	}
	// A renewal still on its way when the lead is left is cancelled (it
	// must not set the lead again once it expired).
	renewCtx, cancelRenewals := context.WithCancel(ctx)
	defer cancelRenewals()
	results := make(chan renewal, 1)
	renewing, failing := false, false
	tick := time.NewTicker(l.lease / 3)
	defer tick.Stop()
	for {
		now := time.Now()
		stopAt := validUntil.Add(-l.lease / 3)
		if !now.Before(stopAt) {
			l.log.Warn("stepped down: the lead could not be renewed for two thirds of coord.lease; another instance may take it once it expires",
				"coord.lease", l.lease)
			stop()
			l.standBy("")
			return false
		}
		if leadDone == nil && !now.Before(startAt) {
			l.mu.Lock()
			l.role = RoleLeader
			l.mu.Unlock()
			l.log.Info("this instance leads", "instance", l.id)
			stopLead, leadDone = startLead(ctx, lead)
		}
		next := stopAt
		if leadDone == nil && startAt.Before(next) {
			next = startAt
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			stop()
			l.release(t.token)
			return false
		case <-leadDone:
			timer.Stop()
			stopLead()
			stopLead = nil
			l.log.Warn("the lead's job ended on its own; giving the lead up")
			l.release(t.token)
			l.standBy("")
			return true
		case <-tick.C:
			renewing = l.renew(renewCtx, wg, t.token, renewing, results)
		case <-wake:
			renewing = l.renew(renewCtx, wg, t.token, renewing, results)
		case r := <-results:
			renewing = false
			switch {
			case r.err != nil:
				if ctx.Err() == nil {
					failing = true
					l.log.Warn("could not renew the lead; retrying", "err", r.err)
				}
			case !r.held:
				timer.Stop()
				l.log.Warn("another instance took the lead; stopping here")
				stop()
				l.standBy("")
				return false
			default:
				if failing {
					failing = false
					l.log.Info("the lead is renewed again")
				}
				if v := r.sent.Add(l.lease); v.After(validUntil) {
					validUntil = v
				}
			}
		case <-timer.C:
		}
		timer.Stop()
	}
}

// startLead runs lead in a goroutine; it returns how to stop it and a
// channel closed when it has returned.
func startLead(ctx context.Context, lead func(context.Context)) (context.CancelFunc, chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(ctx)
	}()
	return cancel, done
}

// renew starts a renewal unless one is running; it reports whether one
// is.
func (l *Leader) renew(ctx context.Context, wg *sync.WaitGroup, token string, renewing bool, results chan<- renewal) bool {
	if renewing {
		return true
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent := time.Now()
		n, err := leadRenew.Run(ctx, l.r.client, []string{holderPrefix + l.name, knownPrefix + l.name},
			token, l.lease.Milliseconds()).Int()
		results <- renewal{sent: sent, held: n == 1, err: err}
	}()
	return true
}

// release deletes the lead if it is still token's and tells the others.
// If Redis cannot be reached, the lead expires within coord.lease.
func (l *Leader) release(token string) {
	l.mu.Lock()
	l.role, l.token, l.holder = RoleStandby, "", ""
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.lease)
	defer cancel()
	if err := leadRelease.Run(ctx, l.r.client, []string{holderPrefix + l.name}, token, chLeadFree, l.name).Err(); err != nil {
		l.log.Warn("could not release the lead; it expires within coord.lease", "coord.lease", l.lease, "err", err)
		return
	}
	l.log.Info("released the lead")
}

// Replies to forwarded requests start with one of these lines.
const (
	replyOK    = "ok\n"
	replyError = "error\n"
)

// onAsk answers a forwarded request meant for this instance's lead.
func (l *Leader) onAsk(ctx context.Context, payload string, answer func(context.Context, []byte) ([]byte, error)) {
	parts := strings.SplitN(payload, "\n", 4)
	if len(parts) != 4 || parts[0] != l.name || instanceOf(parts[1]) != l.id || !strings.HasPrefix(parts[2], replyPrefix) {
		return
	}
	token, replyKey, req := parts[1], parts[2], []byte(parts[3])
	l.mu.Lock()
	held, role := l.token == token, l.role
	l.mu.Unlock()
	var reply string
	switch {
	case !held:
		reply = replyError + "instance " + l.id + " no longer leads"
	case answer == nil:
		reply = replyError + "the lead " + l.name + " answers no requests"
	case role != RoleLeader:
		reply = replyError + "instance " + l.id + " holds the lead but starts only after coord.lease (" + l.lease.String() + "), as redis had no record of an earlier leader"
	default:
		body, err := answer(ctx, req)
		if err != nil {
			reply = replyError + err.Error()
		} else {
			reply = replyOK + string(body)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, l.lease)
	defer cancel()
	if _, err := l.r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, replyKey, reply)
		p.PExpire(ctx, replyKey, l.lease)
		return nil
	}); err != nil && ctx.Err() == nil {
		l.log.Warn("could not answer a request forwarded to the leader", "err", err)
	}
}

// Ask forwards req to the leading instance's answer function (see Run)
// and returns its answer. It waits at most coord.lease (at least a
// second) for it. Without a leader it fails with ErrNoLeader.
func (l *Leader) Ask(ctx context.Context, req []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, max(l.lease, time.Second)+time.Second)
	defer cancel()
	token, err := l.r.client.Get(ctx, holderPrefix+l.name).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%s: %w right now (an election takes up to coord.lease, %s, after a leader dies)", l.name, ErrNoLeader, l.lease)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: find the leading instance in redis: %w", l.name, err)
	}
	leader := instanceOf(token)
	replyKey := replyPrefix + newToken(l.r.instance)
	if err := l.r.client.Publish(ctx, chLeadAsk, l.name+"\n"+token+"\n"+replyKey+"\n"+string(req)).Err(); err != nil {
		return nil, fmt.Errorf("%s: forward to the leading instance %s: %w", l.name, leader, err)
	}
	// (BLPOP counts whole seconds.)
	res, err := l.r.client.BLPop(ctx, max(l.lease, time.Second), replyKey).Result()
	if errors.Is(err, redis.Nil) || (err == nil && len(res) != 2) {
		return nil, fmt.Errorf("%s: the leading instance %s did not answer within coord.lease (%s)", l.name, leader, l.lease)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: wait for the leading instance %s: %w", l.name, leader, err)
	}
	switch reply := res[1]; {
	case strings.HasPrefix(reply, replyOK):
		return []byte(reply[len(replyOK):]), nil
	case strings.HasPrefix(reply, replyError):
		return nil, fmt.Errorf("%s: the leading instance %s: %s", l.name, leader, reply[len(replyError):])
	default:
		return nil, fmt.Errorf("%s: the leading instance %s answered something unreadable", l.name, leader)
	}
}

// SetShared sets a field of the state the successive leaders of the
// election share (it outlives them, not a Redis that loses its data).
func (l *Leader) SetShared(ctx context.Context, field, value string) error {
	if err := l.r.client.HSet(ctx, sharedPrefix+l.name, field, value).Err(); err != nil {
		return fmt.Errorf("%s: keep %s in redis: %w", l.name, field, err)
	}
	return nil
}

// Shared reads a field of the shared state ("" when it is not set).
func (l *Leader) Shared(ctx context.Context, field string) (string, error) {
	v, err := l.r.client.HGet(ctx, sharedPrefix+l.name, field).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: read %s from redis: %w", l.name, field, err)
	}
	return v, nil
}
