package coord

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"koe/conversation"
	"koe/protocol"
)

// Channels of the watch relay.
const (
	chFollow = "koe:watch:follow"  // "instance\nop[\nkind\nkey]"
	inboxPre = "koe:watch:frames:" // + instance: the frames for its watchers

	opFollow   = "+"   // the instance's watchers follow kind/key (said again every third of coord.lease)
	opUnfollow = "-"   // they no longer do
	opSync     = "?"   // the instance (re)subscribed: everyone says again what it follows
	opBye      = "bye" // the instance is closing

	kindClient = "c"
	kindConf   = "f"
)

// relayBatch bounds the frames published in one pipeline.
const relayBatch = 64

// RelayReceiver is what the relay hands the frames of other instances to:
// conversation's Watchers.
type RelayReceiver interface {
	Relayed(f conversation.RelayedFrame)
	RemoteFollow(target protocol.WatchTarget, instance string)
}

// WatchRelay is a conversation.WatchRelay through Redis pub/sub, so that a
// watcher on one koe instance follows clients and characters that talk
// through another.
//
// Each instance subscribes to its own inbox channel and to one channel
// where every instance says what its watchers follow: when that changes,
// every third of coord.lease, and whenever an instance (re)subscribes and
// asks. What an instance has not said again within coord.lease is
// forgotten (it died). A session publishes a frame to the inboxes of the
// instances that want it, and to none when no other instance does.
// Frames are published in order by one goroutine, so each watcher sees a
// speaker's frames in the speaker's order; when the queue before it is
// full (coord.relay_queue), frames are dropped and counted. Pub/sub is
// not durable: what is published while Redis is away is lost, as it is
// for a watcher whose connection drops.
type WatchRelay struct {
	*conn
	instance string
	every    time.Duration // how often this instance says what it follows
	expire   time.Duration // when what another said is forgotten
	log      *slog.Logger
	dropped  func()

	queue    chan relayItem
	announce chan struct{} // say what this instance follows, now
	drops    atomic.Int64
	lastWarn atomic.Int64 // unix nanos of the last warning about drops or failures

	startOnce sync.Once

	// remoteCount is the number of (instance, target) entries in remote.
	remoteCount atomic.Int64

	mu sync.RWMutex
	// remote: by kind, target key, instance: when the entry expires.
	remote map[string]map[string]map[string]time.Time
	// local: what this instance's watchers follow, by kind then key.
	local map[string]map[string]localFollow
	// changed is closed and replaced when remote changes (tests wait on it).
	changed chan struct{}
}

type localFollow struct {
	following bool
	seq       uint64
	// said: an unfollow was told. It is kept one more round, so that a
	// stale Follow for the target (seq lower) is still known as one.
	said bool
}

type relayItem struct {
	to []string
	f  conversation.RelayedFrame
}

var _ conversation.WatchRelay = (*WatchRelay)(nil)

// RelayOptions are what NewWatchRelay needs besides Config.
type RelayOptions struct {
	Logger *slog.Logger
	// Dropped counts a frame dropped for a full queue (nil: not counted).
	Dropped func()
}

// NewWatchRelay connects to c.RedisURL and subscribes. Start begins
// relaying.
func NewWatchRelay(ctx context.Context, c Config, opts RelayOptions) (*WatchRelay, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	instance := newInstanceID()
	cn, err := connect(ctx, c.RedisURL, chFollow, inboxPre+instance)
	if err != nil {
		return nil, fmt.Errorf("watch relay: %w", err)
	}
	queue := c.RelayQueue
	if queue < 1 {
		queue = DefaultConfig().RelayQueue
	}
	r := &WatchRelay{
		conn: cn, instance: instance, every: c.Lease / 3, expire: c.Lease,
		log: log.With("relay_instance", instance), dropped: opts.Dropped,
		queue: make(chan relayItem, queue), announce: make(chan struct{}, 1),
		remote: map[string]map[string]map[string]time.Time{
			kindClient: {}, kindConf: {},
		},
		local:   map[string]map[string]localFollow{kindClient: {}, kindConf: {}},
		changed: make(chan struct{}),
	}
	return r, nil
}

// Instance is this relay's id among the instances.
func (r *WatchRelay) Instance() string { return r.instance }

// Start begins relaying; frames from other instances go to recv.
func (r *WatchRelay) Start(recv RelayReceiver) {
	r.startOnce.Do(func() {
		r.receive(r.onSubscribed, func(m *redis.Message) { r.onMessage(m, recv) })
		r.wg.Add(2)
		go r.publish()
		go r.announcer()
		r.sync()
	})
}

// Close says goodbye to the other instances, stops relaying and closes
// the connection.
func (r *WatchRelay) Close() error {
	return r.close(func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.every)
		defer cancel()
		if err := r.client.Publish(ctx, chFollow, r.instance+"\n"+opBye).Err(); err != nil {
			r.log.Debug("could not tell the other instances this one is closing", "err", err)
		}
	})
}

// Any implements conversation.WatchRelay.
func (r *WatchRelay) Any() bool { return r.remoteCount.Load() > 0 }

// Wanted implements conversation.WatchRelay.
func (r *WatchRelay) Wanted(clientUID, conf string) bool {
	if r.remoteCount.Load() == 0 {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.remote[kindClient][clientUID]) > 0 || conf != "" && len(r.remote[kindConf][conf]) > 0
}

// Send implements conversation.WatchRelay: it queues f for the instances
// that want it, or drops it when the queue is full.
func (r *WatchRelay) Send(f conversation.RelayedFrame) {
	var to []string
	if f.To != "" {
		to = []string{f.To}
	} else {
		r.mu.RLock()
		for inst := range r.remote[kindClient][f.ClientUID] {
			to = append(to, inst)
		}
		for inst := range r.remote[kindConf][f.ConfUID] {
			if _, dup := r.remote[kindClient][f.ClientUID][inst]; !dup {
				to = append(to, inst)
			}
		}
		r.mu.RUnlock()
	}
	if len(to) == 0 {
		return
	}
	select {
	case r.queue <- relayItem{to: to, f: f}:
	default:
		r.drops.Add(1)
		if r.dropped != nil {
			r.dropped()
		}
		r.warn("watch relay queue full (coord.relay_queue): frames for other instances' watchers dropped", "dropped", r.drops.Load())
	}
}

// warn logs at most every 10 seconds.
func (r *WatchRelay) warn(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := r.lastWarn.Load()
	if now-last < int64(10*time.Second) || !r.lastWarn.CompareAndSwap(last, now) {
		return
	}
	r.log.Warn(msg, args...)
}

// Follow implements conversation.WatchRelay.
func (r *WatchRelay) Follow(target protocol.WatchTarget, following bool, seq uint64) {
	kind, key := targetKey(target)
	r.mu.Lock()
	if cur, ok := r.local[kind][key]; ok && cur.seq > seq {
		r.mu.Unlock()
		return
	}
	r.local[kind][key] = localFollow{following: following, seq: seq}
	r.mu.Unlock()
	notify(r.announce)
}

func targetKey(t protocol.WatchTarget) (kind, key string) {
	if t.ClientUID != "" {
		return kindClient, t.ClientUID
	}
	return kindConf, t.ConfUID
}

// header is what precedes a frame's data in a relayed message.
type header struct {
	Kind   conversation.RelayKind `json:"k"`
	Client string                 `json:"c,omitempty"`
	Conf   string                 `json:"f,omitempty"`
	Turn   string                 `json:"t,omitempty"`
	Seq    uint64                 `json:"s,omitempty"`
}

// encode is a relayed message: a JSON header line, then the frame.
func encode(f conversation.RelayedFrame) []byte {
	h, _ := json.Marshal(header{Kind: f.Kind, Client: f.ClientUID, Conf: f.ConfUID, Turn: f.Turn, Seq: f.Seq})
	out := make([]byte, 0, len(h)+1+len(f.Data))
	out = append(append(out, h...), '\n')
	return append(out, f.Data...)
}

func decode(payload string) (conversation.RelayedFrame, error) {
	head, data, ok := strings.Cut(payload, "\n")
	if !ok {
		return conversation.RelayedFrame{}, fmt.Errorf("no header line")
	}
	var h header
	if err := json.Unmarshal([]byte(head), &h); err != nil {
		return conversation.RelayedFrame{}, fmt.Errorf("header: %w", err)
	}
	return conversation.RelayedFrame{Kind: h.Kind, ClientUID: h.Client, ConfUID: h.Conf, Turn: h.Turn, Seq: h.Seq, Data: []byte(data)}, nil
}

// publish sends the queued frames, in order, a pipeline at a time.
func (r *WatchRelay) publish() {
	defer r.wg.Done()
	batch := make([]relayItem, 0, relayBatch)
	for {
		select {
		case <-r.ctx.Done():
			return
		case it := <-r.queue:
			batch = append(batch[:0], it)
		}
	fill:
		for len(batch) < relayBatch {
			select {
			case it := <-r.queue:
				batch = append(batch, it)
			default:
				break fill
			}
		}
		_, err := r.client.Pipelined(r.ctx, func(p redis.Pipeliner) error {
			for _, it := range batch {
				msg := encode(it.f)
				for _, inst := range it.to {
					p.Publish(r.ctx, inboxPre+inst, msg)
				}
			}
			return nil
		})
		if err != nil && r.ctx.Err() == nil {
			r.warn("could not relay frames to other instances' watchers; they are lost", "frames", len(batch), "err", err)
		}
		clear(batch)
	}
}

// onSubscribed: go-redis subscribed again after a connection loss; this
// instance asks everyone to say again what they follow, and says it too.
func (r *WatchRelay) onSubscribed(m *redis.Subscription) {
	if m.Channel == chFollow && m.Kind == "subscribe" {
		r.log.Debug("watch relay subscribed again")
		r.sync()
	}
}

// onMessage hands frames to recv and keeps what the others follow.
func (r *WatchRelay) onMessage(m *redis.Message, recv RelayReceiver) {
	if m.Channel == chFollow {
		r.onFollow(m.Payload, recv)
		return
	}
	f, err := decode(m.Payload)
	if err != nil {
		r.warn("relayed frame not understood; dropped", "err", err)
		return
	}
	recv.Relayed(f)
}

// sync asks the other instances to say what they follow, and says it.
func (r *WatchRelay) sync() {
	ctx, cancel := context.WithTimeout(r.ctx, r.expire)
	defer cancel()
	if err := r.client.Publish(ctx, chFollow, r.instance+"\n"+opSync).Err(); err != nil && r.ctx.Err() == nil {
		r.log.Warn("watch relay: could not ask the other instances what they follow", "err", err)
	}
	notify(r.announce)
}

// onFollow keeps another instance's news of what its watchers follow.
func (r *WatchRelay) onFollow(payload string, recv RelayReceiver) {
	parts := strings.SplitN(payload, "\n", 4)
	inst := parts[0]
	if inst == r.instance || len(parts) < 2 {
		return
	}
	switch op := parts[1]; op {
	case opSync:
		notify(r.announce)
	case opBye:
		r.forget(func(i string, _ time.Time) bool { return i == inst })
	case opFollow, opUnfollow:
		if len(parts) != 4 || parts[2] != kindClient && parts[2] != kindConf {
			return
		}
		kind, key := parts[2], parts[3]
		r.mu.Lock()
		insts := r.remote[kind][key]
		_, had := insts[inst]
		switch {
		case op == opFollow && !had:
			if insts == nil {
				insts = map[string]time.Time{}
				r.remote[kind][key] = insts
			}
			insts[inst] = time.Now().Add(r.expire)
			r.remoteCount.Add(1)
			r.changedLocked()
		case op == opFollow:
			insts[inst] = time.Now().Add(r.expire)
		case had:
			delete(insts, inst)
			if len(insts) == 0 {
				delete(r.remote[kind], key)
			}
			r.remoteCount.Add(-1)
			r.changedLocked()
		}
		r.mu.Unlock()
		if op == opFollow && !had {
			r.log.Debug("watchers of another instance follow", "instance", inst, "kind", kind, "key", key)
		}
		if op == opFollow && !had {
			target := protocol.WatchTarget{ClientUID: key}
			if kind == kindConf {
				target = protocol.WatchTarget{ConfUID: key}
			}
			recv.RemoteFollow(target, inst)
		}
	}
}

// forget drops the remote entries drop says to.
func (r *WatchRelay) forget(drop func(instance string, expires time.Time) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, byKey := range r.remote {
		for key, insts := range byKey {
			for inst, exp := range insts {
				if drop(inst, exp) {
					delete(insts, inst)
					n++
				}
			}
			if len(insts) == 0 {
				delete(byKey, key)
			}
		}
	}
	if n > 0 {
		r.remoteCount.Add(int64(-n))
		r.changedLocked()
	}
}

func (r *WatchRelay) changedLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// changes returns a channel closed at the next change of what other
// instances follow.
func (r *WatchRelay) changes() <-chan struct{} {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.changed
}

// announcer says what this instance's watchers follow every third of
// coord.lease and when asked, and forgets what others did not say again
// in time.
func (r *WatchRelay) announcer() {
	defer r.wg.Done()
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
			now := time.Now()
			r.forget(func(_ string, exp time.Time) bool { return exp.Before(now) })
		case <-r.announce:
		}
		r.sayFollows()
	}
}

// sayFollows publishes what this instance follows, and what it stopped
// following since it last said.
func (r *WatchRelay) sayFollows() {
	type said struct {
		kind, key string
		lf        localFollow
	}
	var all []said
	r.mu.RLock()
	for kind, byKey := range r.local {
		for key, lf := range byKey {
			all = append(all, said{kind, key, lf})
		}
	}
	r.mu.RUnlock()
	all = slices.DeleteFunc(all, func(s said) bool {
		if !s.lf.said {
			return false
		}
		// Told last round: forgotten now, unless followed again.
		r.mu.Lock()
		if r.local[s.kind][s.key] == s.lf {
			delete(r.local[s.kind], s.key)
		}
		r.mu.Unlock()
		return true
	})
	if len(all) == 0 {
		return
	}
	if len(all) == 0 {
		return
	}
	// Characters before clients: an instance that greets a client's new
	// follower then knows what else the follower's instance follows.
	slices.SortFunc(all, func(a, b said) int {
		return cmp.Or(-strings.Compare(a.kind, b.kind), strings.Compare(a.key, b.key))
	})
	ctx, cancel := context.WithTimeout(r.ctx, r.expire)
	defer cancel()
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range all {
			op := opFollow
			if !s.lf.following {
				op = opUnfollow
			}
			p.Publish(ctx, chFollow, r.instance+"\n"+op+"\n"+s.kind+"\n"+s.key)
		}
		return nil
	})
	if err != nil {
		if r.ctx.Err() == nil {
			r.warn("watch relay: could not tell the other instances what this one's watchers follow; trying again", "err", err)
		}
		return
	}
	// Unfollows told are not told again, unless followed again meanwhile.
	r.mu.Lock()
	for _, s := range all {
		if !s.lf.following && r.local[s.kind][s.key] == s.lf {
			s.lf.said = true
			r.local[s.kind][s.key] = s.lf
		}
	}
	r.mu.Unlock()
}
