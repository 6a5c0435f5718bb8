package conversation

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"koe/protocol"
)

// A watcher that connects while a reply is being spoken (an OBS overlay
// reloaded mid-reply) must not stay idle until the next turn: it gets the
// turn's current state (the chain's start and the piece being spoken with
// those sent after it) and follows from there, whichever instance the
// speaker talks through.
//
// What a session has on air is noted as its frames go out to watchers,
// and, when nobody watches, as they go to the client. The note of a frame
// and the lookup of who gets it happen together under the reply's air
// lock, and a watcher is registered under the air locks of the replies
// whose state it takes: every frame is then either in that state or
// offered to the watcher after it, never both, never neither. Until its
// state is out, the frames offered to a joining watcher wait in its own
// queue (watcher.pending), so that none overtakes the state.
//
// Across instances: each frame that changes what is on air is numbered
// within its turn (seq) and relayed with its number. The instance of a
// watcher keeps a mirror of each relayed speaker's reply (noted under the
// same rule, so its later watchers join as local ones do), and when its
// first watcher of a target appears, the speaker's instance sends it the
// state of the replies on air that the target follows. A frame the mirror
// has already noted (by turn and number) is a copy that every watcher
// here has had, and is dropped.

// onAir is a speaker's running reply as a joining watcher needs it: a
// session of this instance, or the mirror of another instance's.
type onAir struct {
	id     uint64        // orders the air locks a joining watcher takes
	client string        // the speaker's client_uid
	conf   func() string // the character it talks as now
	mirror bool          // another instance's speaker

	mu     sync.Mutex
	open   bool            // a chain started and has not ended
	ctx    context.Context // the turn's context for its watchers' frames
	tw     *watchCtx       // the turn's, for a session of this instance
	turn   string          // the turn's id
	seq    uint64          // the number of the turn's latest frame noted
	start  airPiece        // conversation-chain-start
	pieces []airPiece      // the audio pieces not yet played, in order
	bytes  int             // their size
	full   bool            // the turn's pieces outgrew on_air_bytes
	first  time.Time       // when the first of them went out
	seen   time.Time       // a mirror's latest frame
	last   caption         // the display text of the turn's latest piece
	closed bool            // the session is closed: nothing goes on air
}

// airIDs numbers every onAir of the process.
var airIDs atomic.Uint64

func (a *onAir) init(client string, conf func() string, mirror bool) {
	a.id, a.client, a.conf, a.mirror = airIDs.Add(1), client, conf, mirror
}

// airPiece is a frame on air: as sent (msg), or as relayed (data).
type airPiece struct {
	msg  any
	data []byte
	seq  uint64
	dur  time.Duration
	size int
	// caption is its display text, for a joining watcher (air_caption.go)
	caption caption
}

func (p airPiece) encoded() ([]byte, error) {
	if p.data != nil {
		return p.data, nil
	}
	return json.Marshal(p.msg)
}

// airChange is what a frame changes on air.
type airChange int

const (
	airNone airChange = iota
	airStart
	airEnd
	airAudio
)

// airKind is what msg changes on air and, for a piece, its length.
func airKind(msg any) (airChange, time.Duration) {
	switch m := msg.(type) {
	case protocol.Text:
		return controlChange(m.Type, m.Text), 0
	case protocol.Audio:
		return airAudio, pieceLength(m.Volumes, m.SliceLength)
	}
	return airNone, 0
}

// pieceSize is about what an audio piece takes: its audio, as sent.
func pieceSize(p airPiece) int {
	if p.data != nil {
		return len(p.data)
	}
	if m, ok := p.msg.(protocol.Audio); ok && m.Audio != nil {
		return len(*m.Audio) + len(m.DisplayText.Text)
	}
	return 0
}

// airKindOf is airKind of an encoded frame.
func airKindOf(data []byte) (airChange, time.Duration) {
	var f struct {
		Type        string    `json:"type"`
		Text        string    `json:"text"`
		Volumes     []float64 `json:"volumes"`
		SliceLength int       `json:"slice_length"`
	}
	if json.Unmarshal(data, &f) != nil {
		return airNone, 0
	}
	if f.Type == protocol.TypeAudio {
		return airAudio, pieceLength(f.Volumes, f.SliceLength)
	}
	return controlChange(f.Type, f.Text), 0
}

func controlChange(typ, text string) airChange {
	if typ != protocol.TypeControl {
		return airNone
	}
	switch text {
	case protocol.ControlChainStart:
		return airStart
	case protocol.ControlChainEnd, protocol.ControlInterrupt:
		return airEnd
	}
	return airNone
}

func pieceLength(volumes []float64, slice int) time.Duration {
	return time.Duration(len(volumes)*slice) * time.Millisecond
}

// note records a frame of turn gone out on a, whose watchers' frames go by
// ctx (tw: the turn's, on this instance). p.seq is its number on the
// speaker's instance, 0 for a frame of this instance, which gets the
// next. It returns the number the frame goes with (0: none), and whether
// a mirror had it already. The caller holds a.mu.
func (ws *Watchers) note(a *onAir, ctx context.Context, turn string, tw *watchCtx, change airChange, p airPiece) (seq uint64, dup bool) {
	if a.closed || change == airNone {
		return 0, false
	}
	if p.seq != 0 {
		a.seen = time.Now()
		if change != airEnd && turn != "" && turn == a.turn && p.seq <= a.seq {
			return 0, true
		}
	}
	switch change {
	case airStart:
		a.open, a.ctx, a.tw, a.turn, a.pieces, a.first, a.seq = true, ctx, tw, turn, nil, time.Time{}, 0
		a.bytes, a.full, a.last = 0, false, caption{}
		p.seq = a.number(p.seq)
		a.start = p
		ws.onAirSet(a, true)
	case airEnd:
		if a.open {
			a.open, a.ctx, a.tw, a.start, a.pieces = false, nil, nil, airPiece{}, nil
			ws.onAirSet(a, false)
		}
		return 0, false
	case airAudio:
		if turn != a.turn {
			// A piece of a turn whose start was not seen (a mirror that
			// began mid-turn): numbered, to know its copies, not on air.
			a.open, a.turn, a.pieces = false, turn, nil
			ws.onAirSet(a, false)
		}
		p.seq = a.number(p.seq)
		if !a.open || a.full {
			return p.seq, false
		}
		now := time.Now()
		if a.first.IsZero() {
			a.first = now
		}
		a.prune(now)
		p.caption = captionOf(p, a.last)
		a.last = p.caption
		p.size = pieceSize(p)
		if a.bytes+p.size > ws.airBytes {
			// Too much to keep: a watcher that joins gets the chain's
			// start and follows from the next piece.
			clear(a.pieces)
			a.pieces, a.bytes, a.full = nil, 0, true
			return p.seq, false
		}
		a.pieces = append(a.pieces, p)
		a.bytes += p.size
	}
	return p.seq, false
}

// prune lets go of the pieces that have played by now, but the last: a
// watcher joining then gets the one on screen. The caller holds a.mu.
func (a *onAir) prune(now time.Time) {
	elapsed := now.Sub(a.first)
	for len(a.pieces) > 1 && a.pieces[0].dur <= elapsed {
		played := a.pieces[0]
		elapsed -= played.dur
		a.first = a.first.Add(played.dur)
		a.bytes -= played.size
		a.pieces[0] = airPiece{}
		a.pieces = a.pieces[1:]
	}
}

// number is the number of the turn's next frame: seq, when it came with
// one, or the next.
func (a *onAir) number(seq uint64) uint64 {
	if seq == 0 {
		seq = a.seq + 1
	}
	a.seq = seq
	return seq
}

// offAir takes a closing session off air for good: a frame its writer
// hands the watchers late must not put it back.
func (ws *Watchers) offAir(s *Session) {
	a := &s.air
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	a.open, a.ctx, a.tw, a.start, a.pieces = false, nil, nil, airPiece{}, nil
	ws.onAirSet(a, false)
}

// onAirSet keeps the list of replies on air.
func (ws *Watchers) onAirSet(a *onAir, on bool) {
	ws.airMu.Lock()
	defer ws.airMu.Unlock()
	if on {
		if ws.air == nil {
			ws.air = map[*onAir]struct{}{}
		}
		ws.air[a] = struct{}{}
		return
	}
	delete(ws.air, a)
}

// onAirFor lists the replies on air that target follows (those of this
// instance only, with local), in the order their air locks are taken in.
func (ws *Watchers) onAirFor(target protocol.WatchTarget, local bool) []*onAir {
	ws.airMu.Lock()
	var out []*onAir
	for a := range ws.air {
		if local && a.mirror {
			continue
		}
		if target.ClientUID != "" && a.client == target.ClientUID ||
			target.ConfUID != "" && a.conf() == target.ConfUID {
			out = append(out, a)
		}
	}
	ws.airMu.Unlock()
	slices.SortFunc(out, func(a, b *onAir) int { return cmp.Compare(a.id, b.id) })
	return out
}

// state is what a watcher joining now takes of the reply on air: the
// chain's start and the pieces from the one being played on, by the time
// since the first went out. The caller holds a.mu.
func (a *onAir) state(now time.Time) []airPiece {
	if !a.open {
		return nil
	}
	frames := []airPiece{a.start}
	elapsed := now.Sub(a.first)
	var end time.Duration
	for i, p := range a.pieces {
		end += p.dur
		// The piece being played, and every one after it; with no
		// durations (text only) the last piece is the one on screen.
		if end > elapsed || i == len(a.pieces)-1 {
			frames = append(frames, captioned(a.pieces[i]))
			frames = append(frames, a.pieces[i+1:]...)
			break
		}
	}
	return frames
}

// noteOnly notes a frame nobody watches go out of s, if it changes what
// is on air.
func (ws *Watchers) noteOnly(s *Session, ctx context.Context, msg any) {
	change, dur := airKind(msg)
	if change == airNone {
		return
	}
	turn := ""
	tw, _ := ctx.Value(watchContextKey{}).(*watchCtx)
	if tw != nil {
		ctx, turn = tw.ctx, tw.id
	}
	s.air.mu.Lock()
	ws.note(&s.air, ctx, turn, tw, change, airPiece{msg: msg, dur: dur})
	s.air.mu.Unlock()
}

// joinAir registers wr and hands it the state of every reply on air that
// it follows, then what was offered to it meanwhile.
func (ws *Watchers) joinAir(wr *watcher) (first bool, seq uint64) {
	wr.mu.Lock()
	wr.joining = true
	wr.mu.Unlock()
	replies := ws.onAirFor(wr.target, false)
	for _, a := range replies {
		a.mu.Lock()
	}
	first, seq = ws.set.add(wr)
	type state struct {
		ctx    context.Context
		frames []airPiece
	}
	now := time.Now()
	states := make([]state, 0, len(replies))
	for _, a := range replies {
		states = append(states, state{a.ctx, a.state(now)})
	}
	for _, a := range replies {
		a.mu.Unlock()
	}
	if wr.greeting.ConfUID == "" && wr.target.ClientUID != "" {
		// Its session may have opened since Watch looked, and greeted the
		// watchers it found then, before this one was among them.
		if s := ws.session(wr.target.ClientUID); s != nil {
			wr.greeting = s.Character()
		}
	}
	wr.greetWith()
	for _, st := range states {
		for _, f := range st.frames {
			data, err := f.encoded()
			if err != nil {
				continue // frames a turn sent encode: it was sent
			}
			wr.w.Offer(st.ctx, data)
		}
	}
	wr.joined()
	return first, seq
}

// sendAir relays to instance, whose first watcher of target just
// appeared, the state of this instance's replies on air that target
// follows. (Frames noted after the state are relayed to it as well; the
// mirror there drops what it gets twice.)
func (ws *Watchers) sendAir(target protocol.WatchTarget, instance string) {
	for _, a := range ws.onAirFor(target, true) {
		a.mu.Lock()
		frames, tw, conf := a.state(time.Now()), a.tw, a.conf()
		a.mu.Unlock()
		if tw == nil || tw.ctx.Err() != nil {
			continue
		}
		tw.relayEnd(ws.relay, a.client, conf)
		for _, f := range frames {
			data, err := f.encoded()
			if err != nil {
				continue
			}
			ws.relay.Send(RelayedFrame{Kind: RelayFrame, ClientUID: a.client, ConfUID: conf, Turn: tw.id, Seq: f.seq, To: instance, Data: data})
		}
	}
}

// mirroredConf is the character that another instance's speaker client
// talks as in the reply mirrored here ("": none on air).
func (ws *Watchers) mirroredConf(client string) string {
	ws.airMu.Lock()
	defer ws.airMu.Unlock()
	for a := range ws.air {
		if a.mirror && a.client == client {
			return a.conf()
		}
	}
	return ""
}

// mirrorOf is the mirror of another instance's speaker client, talking
// as conf; mirrors idle for long are swept.
func (ws *Watchers) mirrorOf(client, conf string) *onAir {
	now := time.Now()
	ws.airMu.Lock()
	defer ws.airMu.Unlock()
	if now.Sub(ws.mirrorsSwept) > remoteTurnIdle {
		ws.mirrorsSwept = now
		for k, a := range ws.mirrors {
			if a.mu.TryLock() {
				if now.Sub(a.seen) > remoteTurnIdle {
					delete(ws.mirrors, k)
					delete(ws.air, a)
				}
				a.mu.Unlock()
			}
		}
	}
	key := client + "\x00" + conf
	a := ws.mirrors[key]
	if a == nil {
		if ws.mirrors == nil {
			ws.mirrors = map[string]*onAir{}
		}
		a = &onAir{seen: now}
		a.init(client, func() string { return conf }, true)
		ws.mirrors[key] = a
	}
	return a
}
