package conversation

import (
	"context"
	"sync"
	"time"

	"koe/protocol"
)

// Watching across instances: behind a load balancer, an overlay may
// watch through one koe instance a client or a character that talks
// through another. A WatchRelay carries the frames between them: each
// instance tells the others what its watchers follow, and a session
// relays a frame only when some other instance wants it, so nothing is
// encoded or sent when nobody watches elsewhere.

// RelayKind says what a relayed frame is.
type RelayKind int

const (
	// RelayFrame is a frame for every watcher.
	RelayFrame RelayKind = iota + 1
	// RelayKoeFrame is one of koe's events, for the watchers that asked
	// for them.
	RelayKoeFrame
	// RelayGreet is no frame: the client talks as ConfUID now (it
	// connected, or switched character); its watchers are greeted.
	RelayGreet
	// RelayEnd is no frame: Turn was stopped; its frames that the
	// watchers have not been written yet are dropped.
	RelayEnd
)

// RelayedFrame is a session's frame on its way to another instance's
// watchers.
type RelayedFrame struct {
	Kind RelayKind
	// ClientUID and ConfUID are the speaker's: its client_uid and the
	// character it talks as.
	ClientUID, ConfUID string
	// Turn is the turn the frame belongs to ("": none), so that a stop
	// silences it at the watchers' end too.
	Turn string
	// To is the instance it is for; "" is every instance that wants it.
	To string
	// Seq numbers, within Turn, a frame that changes what is on air (a
	// chain's start, an audio piece), so that a copy is known (air.go).
	Seq uint64
	// Data is the encoded frame (RelayFrame, RelayKoeFrame).
	Data []byte
}

// WatchRelay carries frames to the watchers of other koe instances, and
// theirs to this one's (Watchers.Relayed). Package coord has one through
// Redis; without one, a watcher follows the sessions of its own instance.
type WatchRelay interface {
	// Any reports whether watchers on other instances follow anything.
	// It is asked for every frame a session sends: it must be cheap.
	Any() bool
	// Wanted reports whether watchers on other instances follow a
	// session of clientUID talking as conf. Cheap too.
	Wanted(clientUID, conf string) bool
	// Send relays f to the instances that want it (or to f.To). It must
	// not block: what cannot be queued is dropped.
	Send(f RelayedFrame)
	// Follow tells the other instances that this one's watchers follow
	// target, or no longer do. seq grows with every change: a call older
	// than the last one seen for the same target is stale (calls are made
	// without the hub's lock, so two may arrive out of order).
	Follow(target protocol.WatchTarget, following bool, seq uint64)
}

// watchCtx is a turn's context for its watchers' frames (see newTurn)
// and what relaying them needs.
type watchCtx struct {
	ctx context.Context
	id  string
	// relayed: a frame of the turn went to another instance, which is
	// told when the turn is stopped.
	relayed sync.Once
}

// relayEnd makes sure that, once a frame of the turn went to other
// instances, a stop of the turn reaches them too.
func (tw *watchCtx) relayEnd(relay WatchRelay, clientUID, conf string) {
	tw.relayed.Do(func() {
		context.AfterFunc(tw.ctx, func() {
			relay.Send(RelayedFrame{Kind: RelayEnd, ClientUID: clientUID, ConfUID: conf, Turn: tw.id})
		})
	})
}

// relayFrame sends the frame of client's session to the other instances'
// watchers, if any want it.
func (ws *Watchers) relayFrame(client string, tw *watchCtx, conf string, kind watchKind, seq uint64, data []byte) {
	f := RelayedFrame{Kind: RelayFrame, ClientUID: client, ConfUID: conf, Seq: seq, Data: data}
	if kind == watchKoe {
		f.Kind = RelayKoeFrame
	}
	if tw != nil {
		if tw.ctx.Err() != nil {
			return // stopped: its watchers here drop it too
		}
		f.Turn = tw.id
		tw.relayEnd(ws.relay, client, conf)
	}
	ws.relay.Send(f)
}

// Relayed gives this instance's watchers a frame that a session of
// another instance sent (the relay calls it, in the order the frames were
// sent).
func (ws *Watchers) Relayed(f RelayedFrame) {
	switch f.Kind {
	case RelayEnd:
		ws.remoteTurns.end(f.Turn)
		return
	case RelayGreet:
		char, ok := ws.chars.Find(f.ConfUID)
		if !ok {
			ws.log.Debug("relayed greeting for a character this instance does not have", "conf_uid", f.ConfUID)
			return
		}
		byClient, _ := ws.set.of(f.ClientUID, "")
		for _, w := range byClient {
			w.greet(char)
		}
		return
	case RelayFrame, RelayKoeFrame:
	default:
		return
	}
	ctx := ws.remoteTurns.context(f.Turn)
	var byClient, byConf []*watcher
	if f.Kind == RelayFrame {
		// Mirrored and looked up at once, as a session's own frames
		// are (air.go); a copy the mirror has had, every watcher here
		// has had too.
		change, dur := airKindOf(f.Data)
		a := ws.mirrorOf(f.ClientUID, f.ConfUID)
		a.mu.Lock()
		_, dup := ws.note(a, ctx, f.Turn, nil, change, airPiece{data: f.Data, seq: f.Seq, dur: dur})
		byClient, byConf = ws.set.of(f.ClientUID, f.ConfUID)
		a.mu.Unlock()
		if dup {
			return
		}
	} else {
		byClient, byConf = ws.set.of(f.ClientUID, f.ConfUID)
	}
	for _, list := range [][]*watcher{byClient, byConf} {
		for _, w := range list {
			if f.Kind == RelayFrame || w.opts.KoeEvents {
				w.offer(ctx, f.Data)
			}
		}
	}
}

// RemoteFollow is the relay's news that watchers on instance now follow
// target: a client of this instance that they follow is greeted to them
// (a watcher connecting to another instance learns what its client talks
// as), and the replies on air that target follows are sent to them, so
// that a watcher joining mid-reply there starts from the piece being
// played (air.go).
func (ws *Watchers) RemoteFollow(target protocol.WatchTarget, instance string) {
	if ws.relay == nil {
		return
	}
	if target.ClientUID != "" {
		if s := ws.session(target.ClientUID); s != nil && !s.textOnly {
			ws.relay.Send(RelayedFrame{Kind: RelayGreet, ClientUID: s.clientUID, ConfUID: s.Character().ConfUID, To: instance})
		}
	}
	ws.sendAir(target, instance)
}

// remoteTurnIdle is how long a relayed turn's context is kept after its
// last frame: other instances tell only a stop, not a turn's normal end,
// and watchers have long written a turn's frames by then.
const remoteTurnIdle = 2 * time.Minute

// remoteTurns gives the frames of each turn relayed from another instance
// one context, which ends when that turn is stopped.
type remoteTurns struct {
	mu    sync.Mutex
	byID  map[string]*remoteTurn
	swept time.Time
}

type remoteTurn struct {
	ctx    context.Context
	cancel context.CancelFunc
	seen   time.Time
}

// context returns turn's context, made at its first frame.
func (r *remoteTurns) context(turn string) context.Context {
	if turn == "" {
		return context.Background()
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID == nil {
		r.byID = map[string]*remoteTurn{}
	}
	if now.Sub(r.swept) > remoteTurnIdle {
		r.swept = now
		for id, t := range r.byID {
			if now.Sub(t.seen) > remoteTurnIdle {
				t.cancel()
				delete(r.byID, id)
			}
		}
	}
	t := r.byID[turn]
	if t == nil {
		ctx, cancel := context.WithCancel(context.Background())
		t = &remoteTurn{ctx: ctx, cancel: cancel}
		r.byID[turn] = t
	}
	t.seen = now
	return t.ctx
}

// end ends turn's context: its frames not yet written are dropped, and
// so are any that come after (a frame relayed as the turn was stopped
// may follow the news). The ended context is kept as long as a live one.
func (r *remoteTurns) end(turn string) {
	ctx := r.context(turn)
	r.mu.Lock()
	t := r.byID[turn]
	r.mu.Unlock()
	if t != nil && t.ctx == ctx {
		t.cancel()
	}
}
