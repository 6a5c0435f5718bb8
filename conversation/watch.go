package conversation

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"koe"
	"koe/internal/quote"
	"koe/protocol"
)

// Watching: a watcher (an OBS overlay, a second screen) receives what a
// session says without being able to say anything. It attaches to a
// target, not to a session, so that it outlives the speaker's reconnects
// and switches:
//   - a client_uid: that connection's session, whenever one with that
//     client_uid is open (a client that reconnects with its client_uid is
//     followed again);
//   - a conf_uid: whatever any session says while it talks as that
//     character (the live chat's session included).
//
// The speaker never waits for a watcher. Each frame is encoded once and
// offered to every watcher of the speaker, in the speaker's goroutine and
// order; Offer only queues (a watcher whose queue is full drops itself),
// so a watcher costs the speaker a slice append, not a write.

// Watcher receives a session's output, encoded.
type Watcher interface {
	// Offer queues one encoded frame. It must not block: a watcher that
	// cannot take it ends itself. Frames whose ctx has ended when the
	// watcher's writer reaches them are dropped (a stopped turn goes
	// silent at once, as for its speaker).
	Offer(ctx context.Context, frame []byte)
}

// WatchOptions describe one watcher.
type WatchOptions struct {
	// ClientUID is the watcher's own connection id (its set-model-and-conf
	// carries it).
	ClientUID string
	// KoeEvents: the watcher also gets koe's events (tokens, status,
	// citations), not only the OLV frames.
	KoeEvents bool
}

// Watchers attach watchers to what they follow and hand them what the
// sessions say, here and, through the relay, on other instances. The hub
// has one (Hub.Watchers); its methods are safe for concurrent use.
type Watchers struct {
	chars CharacterSource
	// session finds the open session of a client (the hub's).
	session func(clientUID string) *Session
	log     *slog.Logger
	set     watcherSet
	// relay carries frames to and from other instances' watchers, whose
	// turns' frames go by the contexts of remoteTurns (relay.go).
	relay       WatchRelay
	remoteTurns remoteTurns

	// air lists the replies on air, mirrors the speakers of other
	// instances (air.go).
	airBytes     int // conversation.on_air_bytes
	airMu        sync.Mutex
	air          map[*onAir]struct{}
	mirrors      map[string]*onAir
	mirrorsSwept time.Time
}

type watcher struct {
	w      Watcher
	opts   WatchOptions
	target protocol.WatchTarget
	// greeting is the character it is greeted with when it joins.
	greeting Character

	// While joining, what is offered waits in pending until the state of
	// the replies on air has gone out (air.go). greeted: its target's
	// session has greeted it (greet).
	mu      sync.Mutex
	joining bool
	pending []pendingFrame
	greeted bool
}

type pendingFrame struct {
	ctx  context.Context
	data []byte
}

// offer hands the watcher one encoded frame, after its joining state.
func (w *watcher) offer(ctx context.Context, data []byte) {
	w.mu.Lock()
	if w.joining {
		w.pending = append(w.pending, pendingFrame{ctx, data})
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.w.Offer(ctx, data)
}

// joined ends joining: what waited goes out, in order, and then frames
// go straight to the watcher.
func (w *watcher) joined() {
	for {
		w.mu.Lock()
		batch := w.pending
		w.pending = nil
		if len(batch) == 0 {
			w.joining = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		for _, f := range batch {
			w.w.Offer(f.ctx, f.data)
		}
	}
}

// watcherSet is who watches what. Lookups happen for every frame a
// session sends while anyone watches; count lets sessions skip them (and
// the encoding) when nobody does.
type watcherSet struct {
	count atomic.Int64

	mu       sync.Mutex
	byClient map[string][]*watcher
	byConf   map[string][]*watcher
	// seq numbers the changes, for the relay's news of them.
	seq uint64
}

// add registers w; following says whether it is the first of its target
// (other instances are then told), seq orders that news.
func (ws *watcherSet) add(w *watcher) (following bool, seq uint64) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byClient == nil {
		ws.byClient, ws.byConf = map[string][]*watcher{}, map[string][]*watcher{}
	}
	m, key := ws.index(w.target)
	m[key] = append(m[key], w)
	ws.count.Add(1)
	ws.seq++
	return len(m[key]) == 1, ws.seq
}

// remove unregisters w; gone says whether it was the last of its target.
func (ws *watcherSet) remove(w *watcher) (gone bool, seq uint64) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	m, key := ws.index(w.target)
	list := m[key]
	for i, x := range list {
		if x == w {
			// A new slice: lookups hand out the old one without the lock.
			next := append(append([]*watcher(nil), list[:i]...), list[i+1:]...)
			if len(next) == 0 {
				delete(m, key)
			} else {
				m[key] = next
			}
			ws.count.Add(-1)
			ws.seq++
			return len(next) == 0, ws.seq
		}
	}
	return false, 0
}

// index is the map and key of a target. ws.mu is held.
func (ws *watcherSet) index(t protocol.WatchTarget) (map[string][]*watcher, string) {
	if t.ClientUID != "" {
		return ws.byClient, t.ClientUID
	}
	return ws.byConf, t.ConfUID
}

// of returns the watchers of a session talking as conf. The slices are
// never changed in place, so the caller reads them without the lock.
func (ws *watcherSet) of(clientUID, conf string) (byClient, byConf []*watcher) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.byClient[clientUID], ws.byConf[conf]
}

// Watch attaches w to target until the returned function is called. The
// watcher is greeted at once when the target is there to be seen (an open
// session with that client_uid; a configured character). An unknown
// character is refused (KindNotFound); a client_uid that no session has
// yet is waited for.
func (ws *Watchers) Watch(target protocol.WatchTarget, w Watcher, opts WatchOptions) (stop func(), err error) {
	greeting, err := ws.watchable(target)
	if err != nil {
		return nil, err
	}
	if target.ClientUID != "" {
		if s := ws.session(target.ClientUID); s != nil {
			greeting = s.Character()
		} else if conf := ws.mirroredConf(target.ClientUID); conf != "" {
			// It talks through another instance, which greets too;
			// what this one mirrors of it must not come first.
			greeting, _ = ws.chars.Find(conf)
		}
	}
	if watchLooked != nil {
		watchLooked()
	}
	wr := &watcher{w: w, opts: opts, target: target, greeting: greeting}
	if first, seq := ws.joinAir(wr); first && ws.relay != nil {
		ws.relay.Follow(target, true, seq)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if last, seq := ws.set.remove(wr); last && ws.relay != nil {
				ws.relay.Follow(target, false, seq)
			}
		})
	}, nil
}

// watchLooked, when set (by tests only), runs in Watch once it has looked
// for the watched session and before the watcher is listed.
var watchLooked func()

// CheckWatch reports why target cannot be watched, if it cannot: the
// server asks before it accepts the WebSocket.
func (ws *Watchers) CheckWatch(target protocol.WatchTarget) error {
	_, err := ws.watchable(target)
	return err
}

// watchable checks target and returns the character a conf watcher sees.
func (ws *Watchers) watchable(target protocol.WatchTarget) (Character, error) {
	switch {
	case (target.ClientUID == "") == (target.ConfUID == ""):
		return Character{}, invalid("watch one thing: a client_uid or a conf_uid")
	case target.ClientUID != "" && !protocol.ValidClientUID(target.ClientUID):
		return Character{}, invalid("%q is not a client_uid (1-%d letters, digits, '-' or '_')", quote.Shorten(target.ClientUID, 80), protocol.MaxClientUIDLen)
	case target.ConfUID != "":
		char, ok := ws.chars.Find(target.ConfUID)
		if !ok {
			return Character{}, koe.Errorf(koe.NotFound, "no character has conf_uid %q", quote.Shorten(target.ConfUID, 80))
		}
		return char, nil
	}
	return Character{}, nil
}

// greet sends a watcher the OLV connect sequence for the character it
// sees, without start-mic: it has no microphone to start. It is sent again
// when the character changes, as a client sees after switch-config.
func (w *watcher) greet(char Character) {
	w.mu.Lock()
	w.greeted = true
	w.mu.Unlock()
	for _, data := range w.greetFrames(char) {
		w.offer(context.Background(), data)
	}
}

// greetWith sends the greeting a joining watcher starts with, if its
// target is there to be seen and has not greeted it already, ahead of
// anything offered to it.
func (w *watcher) greetWith() {
	w.mu.Lock()
	skip := w.greeting.ConfUID == "" || w.greeted
	if !skip {
		w.greeted = true
	}
	w.mu.Unlock()
	if skip {
		return
	}
	for _, data := range w.greetFrames(w.greeting) {
		w.w.Offer(context.Background(), data)
	}
}

func (w *watcher) greetFrames(char Character) [][]byte {
	group := protocol.GroupUpdate{Type: protocol.TypeGroupUpdate, Members: []string{}}
	var out [][]byte
	for _, msg := range []any{
		group,
		protocol.FullText(protocol.ConnectionEstablished),
		protocol.SetModelAndConf{Type: protocol.TypeSetModelAndConf, ModelInfo: modelInfoOf(char.ModelInfo).frame,
			ConfName: char.ConfName, ConfUID: char.ConfUID, ClientUID: w.opts.ClientUID},
		group,
	} {
		data, err := json.Marshal(msg)
		if err != nil {
			continue // model_info came from YAML: it always encodes
		}
		out = append(out, data)
	}
	return out
}

// greet tells the client watchers of session s, here and on other
// instances, that it talks as char now (it connected, or switched
// character). Conf watchers see one character throughout and need no
// news.
func (ws *Watchers) greet(s *Session, char Character) {
	if s.textOnly {
		return
	}
	if ws.relay != nil && ws.relay.Wanted(s.clientUID, "") {
		ws.relay.Send(RelayedFrame{Kind: RelayGreet, ClientUID: s.clientUID, ConfUID: char.ConfUID})
	}
	if ws.set.count.Load() == 0 {
		return
	}
	byClient, _ := ws.set.of(s.clientUID, "")
	for _, w := range byClient {
		w.greet(char)
	}
}

// watchKind says who may see a frame: nobody, every watcher, or only
// those that asked for koe's events.
type watchKind int

const (
	watchNone watchKind = iota
	watchAll
	watchKoe
)

// watchable is the policy of what a watcher sees: a turn's output, never
// the answers to its speaker's own requests (history lists, prompts,
// errors).
func watchable(msg any) watchKind {
	switch m := msg.(type) {
	case protocol.Audio, protocol.ToolCallStatus:
		return watchAll
	case protocol.Text:
		switch m.Type {
		case protocol.TypeFullText, protocol.TypeUserInputTranscription:
			return watchAll
		case protocol.TypeControl:
			switch m.Text {
			case protocol.ControlChainStart, protocol.ControlChainEnd, protocol.ControlInterrupt:
				return watchAll
			}
		}
	case protocol.Simple:
		switch m.Type {
		case protocol.TypeBackendSynthComplete, protocol.TypeForceNewMessage:
			return watchAll
		}
	case protocol.Token, protocol.Status, protocol.MessageEvent, protocol.Citations, protocol.Ask, protocol.AskEnd, protocol.ClientToolCalls:
		return watchKoe
	}
	return watchNone
}

// offer offers msg to the watchers of session s, once the client's copy
// is out (or in the sender's goroutine, with a Sender that cannot say).
func (ws *Watchers) offer(s *Session, ctx context.Context, msg any) {
	if !ws.watching(s, msg) {
		ws.noteOnly(s, ctx, msg)
		return
	}
	kind := watchable(msg)
	conf := s.Character().ConfUID
	tw, _ := ctx.Value(watchContextKey{}).(*watchCtx)
	if tw != nil {
		ctx = tw.ctx
	}
	// Noted on air and looked up at once: a watcher joining now gets
	// the frame either in its state or here (air.go).
	change, dur := airKind(msg)
	turn := ""
	if tw != nil {
		turn = tw.id
	}
	s.air.mu.Lock()
	seq, _ := ws.note(&s.air, ctx, turn, tw, change, airPiece{msg: msg, dur: dur})
	byClient, byConf := ws.set.of(s.clientUID, conf)
	s.air.mu.Unlock()
	relay := ws.relay != nil && ws.relay.Wanted(s.clientUID, conf)
	if len(byClient)+len(byConf) == 0 && !relay {
		return
	}
	data, err := json.Marshal(msg)
	if err != nil {
		s.log.Debug("frame not encoded for watchers", "type", fmt.Sprintf("%T", msg), "err", err)
		return
	}
	for _, list := range [][]*watcher{byClient, byConf} {
		for _, w := range list {
			if kind == watchAll || w.opts.KoeEvents {
				w.offer(ctx, data)
			}
		}
	}
	if relay {
		ws.relayFrame(s.clientUID, tw, conf, kind, seq, data)
	}
}

// thenSender is a Sender that can call back once a message is written
// (the server's connections are). A nil msg writes nothing and calls
// back in its place in the order.
type thenSender interface {
	SendThen(ctx context.Context, msg any, then func()) error
}

// emit is the one way out of a session for a turn's events: every event a
// turn makes goes through it, in the turn's order, and each audience takes
// what it renders. The client takes the OLV frames, and koe's own events
// (tokens, status, messages, citations) when it asked for them; the
// watchers, here and on other instances, take their copy once the
// client's is written, when the Sender can say when (a watcher must not
// delay its speaker: see conn.SendThen).
//
// A round's audience (the group's other members, a chat API stream) takes
// its copy after the speaker's own is queued, without waiting (audience.offer).
func (s *Session) emit(ctx context.Context, msg any) error {
	err := s.emitOwn(ctx, msg)
	if a := s.audience.Load(); a != nil {
		a.offer(ctx, msg)
	}
	return err
}

// emitOwn is emit to the session's own client and watchers.
func (s *Session) emitOwn(ctx context.Context, msg any) error {
	ws := s.hub.watch
	toClient := s.koeEvents || watchable(msg) != watchKoe
	if !ws.watching(s, msg) {
		ws.noteOnly(s, ctx, msg)
		if !toClient {
			return nil
		}
		return s.out.Send(ctx, msg)
	}
	if ts, ok := s.out.(thenSender); ok {
		var m any
		if toClient {
			m = msg
		}
		return ts.SendThen(ctx, m, func() { ws.offer(s, ctx, msg) })
	}
	if toClient {
		if err := s.out.Send(ctx, msg); err != nil {
			return err
		}
	}
	ws.offer(s, ctx, msg)
	return nil
}

// emitWait is emit that waits until the client's copy has been written.
// The watchers get the frame even if the client is gone: unless the turn
// was stopped (then its watchers' context has ended and drops it), the
// client left as the turn was ending.
func (s *Session) emitWait(ctx context.Context, msg any) error {
	err := s.out.SendWait(ctx, msg)
	s.hub.watch.offer(s, ctx, msg)
	if a := s.audience.Load(); a != nil {
		a.offer(ctx, msg)
	}
	return err
}

// watching reports whether anyone, here or on another instance, may be
// watching msg go out of session s.
func (ws *Watchers) watching(s *Session, msg any) bool {
	if !ws.anyone() {
		return false
	}
	return watchable(msg) != watchNone
}

// anyone reports whether any watcher, here or on another instance, may
// be watching some session.
func (ws *Watchers) anyone() bool {
	return ws.set.count.Load() != 0 || ws.relay != nil && ws.relay.Any()
}

// takesKoeEvents reports whether koe's own events of s (tokens, status,
// messages, citations: watchKoe) may go anywhere: to its client, when it
// asked for them, or to a watcher. When not, emit would drop them, and a
// caller may skip building them: a turn makes one per LLM delta.
func (s *Session) takesKoeEvents() bool {
	if a := s.audience.Load(); a != nil && a.koe {
		return true
	}
	return s.koeEvents || s.hub.watch.anyone()
}
