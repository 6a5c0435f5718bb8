package conversation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"koe"
	"koe/internal/quote"
	"koe/protocol"
)

// A live session is a character talking to an audience (package livechat
// feeds it a stream's chat): a session with no client of its own, heard
// through its watchers (an OBS overlay watching the character), in one
// history it keeps across restarts.
//
// The streamer comes first. A character says one thing at a time: a live
// turn starts only when no other session of the character is running a
// turn, and a turn the streamer starts in another session stops the live
// one at once.

// errYielded stops a live turn for a turn of another session of its
// character. The live chat counts it as yielded, not failed.
var errYielded error = yieldedError{}

type yieldedError struct{}

func (yieldedError) Error() string { return "another session of the character started a turn" }
func (yieldedError) Yielded() bool { return true }

// errSkipped stops a live turn the streamer skipped.
var errSkipped = errors.New("skipped")

// Live is a character's live session.
type Live struct {
	hub  *Hub
	s    *Session
	conf string
	// counted ends its count among open sessions, once.
	counted func()
}

// liveClientUID is the client_uid of a character's live session: watch it
// with ?watch=, or the character with ?watch_conf=.
func liveClientUID(confUID string) string {
	id := "live-" + strings.Map(func(r rune) rune {
		if r == '.' {
			return '-'
		}
		return r
	}, confUID)
	if len(id) > protocol.MaxClientUIDLen {
		id = id[:protocol.MaxClientUIDLen]
	}
	return id
}

// LiveOptions say which live session to open.
type LiveOptions struct {
	// Character is the conf_uid of the character ("" for the default
	// one); History the history it talks in, created if it does not
	// exist yet.
	Character, History string
	// Rules end the live session's system prompt: how to read the
	// audience's messages (livechat.Instruction).
	Rules string
}

// OpenLive opens a character's live session. ctx bounds its life; Close
// ends it. A character has one live session.
func (h *Hub) OpenLive(ctx context.Context, opts LiveOptions) (*Live, error) {
	confUID, historyUID := opts.Character, opts.History
	char := h.deps.Characters.Default()
	if confUID != "" {
		var ok bool
		if char, ok = h.deps.Characters.Find(confUID); !ok {
			return nil, fmt.Errorf("live session: no character has conf_uid %q", quote.Shorten(confUID, 80))
		}
	}
	conf := char.ConfUID
	if !koe.ValidID(historyUID) {
		return nil, fmt.Errorf("live session: history %q is not a valid history id", quote.Shorten(historyUID, 80))
	}
	if _, err := h.deps.Store.LastSeq(ctx, conf, historyUID); errors.Is(err, koe.ErrNotFound) {
		if err := h.deps.Store.CreateWith(ctx, conf, historyUID); err != nil {
			return nil, fmt.Errorf("live session: create history %s: %w", historyUID, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("live session: %w", err)
	}

	uid := liveClientUID(conf)
	s := newSession(ctx, h, discard{}, SessionOptions{ClientUID: uid, Headless: true, Rules: opts.Rules, Logger: h.log.With("live", conf)}, char)
	l := &Live{hub: h, s: s, conf: conf, counted: sync.OnceFunc(h.deps.Observer.SessionOpened("live"))}
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		s.cast.agent.Close()
		l.counted()
		return nil, errHubClosed
	case h.lives[conf] != nil:
		h.mu.Unlock()
		s.cast.agent.Close()
		l.counted()
		return nil, fmt.Errorf("live session: character %s has one already", conf)
	}
	replaced, err := h.claimLocked(s)
	if err != nil {
		h.mu.Unlock()
		s.cast.agent.Close()
		l.counted()
		return nil, fmt.Errorf("live session: %w", err)
	}
	if h.lives == nil {
		h.lives = map[string]*Live{}
	}
	h.lives[conf] = l
	h.mu.Unlock()
	if replaced != nil {
		replaced()
	}
	h.applyPrompts(s.cast)
	if _, err := s.loadHistory(conf, historyUID); err != nil {
		l.Close()
		return nil, fmt.Errorf("live session: %w", err)
	}
	return l, nil
}

// Say runs one turn with text as the audience's message and returns once
// it has ended: spoken (its audio has had the time to play), stopped or
// failed. It first waits until no other session of the character runs a
// turn. Ending ctx stops the turn (a skip).
func (l *Live) Say(ctx context.Context, text string) error {
	_, err := l.Reply(ctx, text, nil)
	return err
}

// Reply is Say for a turn that answers viewers (their display names, which
// the turn's watchers are told of), and returns the reply as its watchers
// were shown it (its display pieces, without emotions): the live chat
// posts it in the chat.
func (l *Live) Reply(ctx context.Context, text string, viewers []string) (string, error) {
	if err := l.hub.characters.idle(ctx, l.conf); err != nil {
		return "", err
	}
	t := l.s.start(turnInput{text: text, viewers: viewers})
	if t == nil {
		return "", koe.ErrRestarting
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		t.cancel(errSkipped)
		<-t.done
		return "", ctx.Err()
	}
	if t.err != nil {
		return "", t.err
	}
	if cause := context.Cause(t.ctx); errors.Is(cause, errYielded) {
		return "", cause
	}
	return t.shownText(), nil
}

// shownText is the whole reply as its pieces were sent.
func (t *turn) shownText() string {
	t.sentMu.Lock()
	defer t.sentMu.Unlock()
	var b strings.Builder
	for _, p := range t.sent {
		if b.Len() > 0 && p.text != "" && !strings.HasPrefix(p.text, " ") && !strings.HasSuffix(b.String(), " ") {
			b.WriteByte(' ')
		}
		b.WriteString(p.text)
	}
	return b.String()
}

// Drain makes the live session start no turn from now on (Say fails with
// koe.ErrRestarting), as Session.Drain does: it reports whether a turn is
// running, and idle is called once that one has ended.
func (l *Live) Drain(idle func()) bool { return l.s.Drain(idle) }

// Character is the character the live session talks as.
func (l *Live) Character() Character { return l.s.Character() }

// Info describes the live session.
func (l *Live) Info() protocol.SessionInfo { return l.s.Info() }

// Close stops the running turn and ends the live session.
func (l *Live) Close() {
	l.hub.mu.Lock()
	if l.hub.lives[l.conf] == l {
		delete(l.hub.lives, l.conf)
	}
	l.hub.mu.Unlock()
	l.s.Close()
	l.counted()
}

// yieldLive stops the live turn of character conf, if one runs, for a turn
// of another session.
func (h *Hub) yieldLive(conf string) {
	h.mu.Lock()
	l := h.lives[conf]
	h.mu.Unlock()
	if l != nil {
		l.s.turns.stop(errYielded)
	}
}

// characterTurns counts the turns running per character outside its live
// session, so that the live session can wait for none.
type characterTurns struct {
	mu      sync.Mutex
	running map[string]int
	idleCh  map[string]chan struct{} // closed when running drops to 0
}

func (c *characterTurns) started(conf string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == nil {
		c.running, c.idleCh = map[string]int{}, map[string]chan struct{}{}
	}
	c.running[conf]++
}

func (c *characterTurns) ended(conf string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[conf]--
	if c.running[conf] > 0 {
		return
	}
	delete(c.running, conf)
	if ch := c.idleCh[conf]; ch != nil {
		close(ch)
		delete(c.idleCh, conf)
	}
}

// idle returns once no turn of conf runs outside its live session.
func (c *characterTurns) idle(ctx context.Context, conf string) error {
	for {
		c.mu.Lock()
		if c.running[conf] == 0 {
			c.mu.Unlock()
			return nil
		}
		ch := c.idleCh[conf]
		if ch == nil {
			ch = make(chan struct{})
			c.idleCh[conf] = ch
		}
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// discard is the live session's client: there is none, only watchers.
type discard struct{}

func (discard) Send(ctx context.Context, _ any) error     { return ctx.Err() }
func (discard) SendWait(ctx context.Context, _ any) error { return ctx.Err() }

// waitSpoken holds a headless turn until its audio has had the time to
// play from the first piece on, as its watchers play it: the next live
// turn must not talk over this one.
func waitSpoken(ctx context.Context, t *turn, spoken time.Duration) {
	t.sentMu.Lock()
	first := t.firstSent
	t.sentMu.Unlock()
	if first.IsZero() {
		return
	}
	wait := time.Until(first.Add(spoken))
	if wait <= 0 {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
