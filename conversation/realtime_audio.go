package conversation

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"
)

// A Realtime API client (package realtime) plays the reply on its own and
// says how much of it the user heard only when the user cut it short:
// conversation.item.truncate, with the point its playback reached. When
// its own voice detection hears the user start talking over a reply
// (barge-in), the reply stops at once, but what memory and history keep
// of it waits for that truncate, which follows within a round trip.

// bargeInCause stops a turn whose record waits for the client's truncate.
type bargeInCause struct {
	// guess is what had had the time to play when the user spoke, kept
	// if no truncate comes.
	guess string
	heard chan string // one truncate's text, buffered
}

func (*bargeInCause) Error() string { return "interrupted by the user talking over the reply" }

// BargeIn stops the running reply because the user started talking over
// it, without waiting for the turn to end (the caller is a read loop that
// must go on reading the truncate). What the turn stores of the reply is
// what Truncate then reports as heard; if no truncate comes before the
// next turn starts, the session stops or conversation.playback_timeout
// passes, it is what had had the time to play. A turn still hearing its
// recording is left alone: the user only paused, and its answer stops
// when it begins if they are still talking then. It reports whether a
// reply was stopped.
func (s *Session) BargeIn() bool {
	t := s.turns.running()
	if t == nil || !t.replying.Load() || t.finishing.Load() {
		return false
	}
	if bc := (*bargeInCause)(nil); errors.As(context.Cause(t.ctx), &bc) {
		return false // stopped already, waiting for its truncate
	}
	t.cancel(&bargeInCause{guess: t.heardText(), heard: make(chan string, 1)})
	return true
}

// Truncate says the user heard the running (or barged-in) reply's audio
// up to audioEnd: only the text of that much is stored, the piece being
// played then cut back to its last whole word. It returns that text, and
// false when no reply is running or waiting for it.
func (s *Session) Truncate(audioEnd time.Duration) (string, bool) {
	t := s.turns.running()
	if t == nil || t.finishing.Load() {
		return "", false
	}
	heard := t.heardUntil(audioEnd)
	var bc *bargeInCause
	if errors.As(context.Cause(t.ctx), &bc) {
		select {
		case bc.heard <- heard:
		default: // a truncate came already: the first one counts
		}
		return heard, true
	}
	return heard, s.turns.stop(interruptCause{heard: heard})
}

// awaitHeard is what a barged-in turn stores: the truncate's text, or
// the guess once another stop, the session's end or playback_timeout
// comes first.
func (s *Session) awaitHeard(t *turn, bc *bargeInCause) string {
	timer := time.NewTimer(s.deps.Config.PlaybackTimeout)
	defer timer.Stop()
	select {
	case h := <-bc.heard:
		return h
	case <-t.hurry:
	case <-timer.C:
		s.log.Debug("no truncate after a barge-in; keeping what had had the time to play")
	case <-s.ctx.Done():
	}
	return bc.guess
}

// heardUntil is the text of the reply's pieces that played within the
// first d of its audio: whole pieces, and of the piece playing at d the
// share of its text its played share of audio stands for, cut back to a
// whole word (a text piece with no audio plays in no time).
func (t *turn) heardUntil(d time.Duration) string {
	t.sentMu.Lock()
	defer t.sentMu.Unlock()
	var b strings.Builder
	var at time.Duration
	for _, p := range t.sent {
		if at+p.dur <= d {
			b.WriteString(p.text)
			at += p.dur
			continue
		}
		if d > at {
			b.WriteString(wordsOf(p.text, float64(d-at)/float64(p.dur)))
		}
		break
	}
	return b.String()
}

// wordsOf is the first share (0..1) of text, by characters, cut back to
// the end of its last whole word.
func wordsOf(text string, share float64) string {
	r := []rune(text)
	n := int(share * float64(len(r)))
	if n >= len(r) {
		return text
	}
	// A word cut in the middle was not heard whole. Text written
	// without spaces (Japanese, Chinese) is cut where the share ends.
	cut := n
	for cut > 0 && !unicode.IsSpace(r[cut]) {
		cut--
	}
	if cut == 0 && !strings.ContainsFunc(text, unicode.IsSpace) {
		cut = n
	}
	return strings.TrimRightFunc(string(r[:cut]), unicode.IsSpace)
}

// VoiceInput is what a Realtime connection's own voice detection takes of
// koe's settings: how long speech must last to count
// (conversation.vad.start_ms) and the longest utterance
// (conversation.max_utterance), which also bounds its input buffer.
func (h *Hub) VoiceInput() (startMillis int, maxUtterance time.Duration) {
	return h.deps.Config.VAD.StartMillis, h.deps.Config.MaxUtterance
}
