package conversation

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"koe/protocol"
)

// A watcher that connects while a session's turn is being spoken (an OBS
// overlay reloaded mid-reply) must not stay idle until the next turn: it
// gets the turn's current state (the chain's start and the piece being
// spoken with those sent after it) and follows from there.
//
// What a session has on air is noted as its frames go out to watchers,
// and, when nobody watches, as they go to the client. The note of a frame
// and the lookup of who gets it happen together under the session's air
// lock, and a watcher is registered under the air locks of the sessions
// whose state it takes: every frame is then either in that state or
// offered to the watcher after it, never both, never neither. Until its
// state is out, the frames offered to a joining watcher wait in its own
// queue (watcher.pending), so that none overtakes the state.

// onAir is a session's running reply as a joining watcher needs it.
type onAir struct {
	mu     sync.Mutex
	open   bool            // a chain started and has not ended
	ctx    context.Context // the turn's context for its watchers' frames
	start  any             // conversation-chain-start
	pieces []airPiece      // the audio pieces, in order
	first  time.Time       // when the first piece went out
	closed bool            // the session is closed: nothing goes on air
}

// airPiece is an audio piece as sent, with its length.
type airPiece struct {
	msg any
	dur time.Duration
}

// airKind says what a frame changes on air.
func airKind(msg any) (start, end bool, piece *protocol.Audio) {
	switch m := msg.(type) {
	case protocol.Text:
		if m.Type == protocol.TypeControl {
			switch m.Text {
			case protocol.ControlChainStart:
				return true, false, nil
			case protocol.ControlChainEnd, protocol.ControlInterrupt:
				return false, true, nil
			}
		}
	case protocol.Audio:
		return false, false, &m
	}
	return false, false, nil
}

// note records msg as gone out of s. The caller holds s.air.mu. ws's list
// of sessions on air follows.
func (ws *Watchers) note(s *Session, ctx context.Context, msg any) {
	start, end, piece := airKind(msg)
	a := &s.air
	switch {
	case a.closed:
	case start:
		a.open, a.ctx, a.start, a.pieces, a.first = true, ctx, msg, nil, time.Time{}
		ws.onAirSet(s, true)
	case end:
		if a.open {
			a.open, a.ctx, a.start, a.pieces = false, nil, nil, nil
			ws.onAirSet(s, false)
		}
	case piece != nil && a.open:
		if a.first.IsZero() {
			a.first = time.Now()
		}
		dur := time.Duration(len(piece.Volumes)*piece.SliceLength) * time.Millisecond
		a.pieces = append(a.pieces, airPiece{msg, dur})
	}
}

// offAir takes a closing session off air for good: a frame its writer
// hands the watchers late must not put it back.
func (ws *Watchers) offAir(s *Session) {
	s.air.mu.Lock()
	defer s.air.mu.Unlock()
	s.air.closed = true
	s.air.open, s.air.ctx, s.air.start, s.air.pieces = false, nil, nil, nil
	ws.onAirSet(s, false)
}

// onAirSet keeps the list of sessions with a reply on air.
func (ws *Watchers) onAirSet(s *Session, on bool) {
	ws.airMu.Lock()
	defer ws.airMu.Unlock()
	if on {
		if ws.air == nil {
			ws.air = map[*Session]struct{}{}
		}
		ws.air[s] = struct{}{}
		return
	}
	delete(ws.air, s)
}

// onAirFor lists the sessions with a reply on air that target follows,
// in a stable order (their air locks are taken in it).
func (ws *Watchers) onAirFor(target protocol.WatchTarget) []*Session {
	ws.airMu.Lock()
	var out []*Session
	for s := range ws.air {
		if target.ClientUID != "" && s.clientUID == target.ClientUID ||
			target.ConfUID != "" && s.Character().ConfUID == target.ConfUID {
			out = append(out, s)
		}
	}
	ws.airMu.Unlock()
	slices.SortFunc(out, func(a, b *Session) int { return cmp.Compare(a.clientUID, b.clientUID) })
	return out
}

// state is what a watcher joining now takes of the reply on air: the
// chain's start and the pieces from the one being played on, by the time
// since the first went out. The caller holds a.mu.
func (a *onAir) state(now time.Time) (context.Context, []any) {
	if !a.open {
		return nil, nil
	}
	frames := []any{a.start}
	elapsed := now.Sub(a.first)
	var end time.Duration
	for i, p := range a.pieces {
		end += p.dur
		// The piece being played, and every one after it; with no
		// durations (text only) the last piece is the one on screen.
		if end > elapsed || i == len(a.pieces)-1 {
			for _, q := range a.pieces[i:] {
				frames = append(frames, q.msg)
			}
			break
		}
	}
	return a.ctx, frames
}

// noteOnly notes a frame nobody watches go out, if it changes what is
// on air.
func (ws *Watchers) noteOnly(s *Session, ctx context.Context, msg any) {
	if start, end, piece := airKind(msg); !start && !end && piece == nil {
		return
	}
	if tw, _ := ctx.Value(watchContextKey{}).(*watchCtx); tw != nil {
		ctx = tw.ctx
	}
	s.air.mu.Lock()
	ws.note(s, ctx, msg)
	s.air.mu.Unlock()
}

// joinAir registers wr and hands it the state of every reply on air that
// it follows, then what was offered to it meanwhile.
func (ws *Watchers) joinAir(wr *watcher) (first bool, seq uint64) {
	wr.mu.Lock()
	wr.joining = true
	wr.mu.Unlock()
	sessions := ws.onAirFor(wr.target)
	for _, s := range sessions {
		s.air.mu.Lock()
	}
	first, seq = ws.set.add(wr)
	type state struct {
		ctx    context.Context
		frames []any
	}
	now := time.Now()
	states := make([]state, 0, len(sessions))
	for _, s := range sessions {
		ctx, frames := s.air.state(now)
		states = append(states, state{ctx, frames})
	}
	for _, s := range sessions {
		s.air.mu.Unlock()
	}
	wr.greetWith()
	for _, st := range states {
		for _, f := range st.frames {
			data, err := json.Marshal(f)
			if err != nil {
				continue // frames a turn sent encode: it was sent
			}
			wr.w.Offer(st.ctx, data)
		}
	}
	wr.joined()
	return first, seq
}
