package conversation

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"sync"
	"time"

	"koe/internal/quote"
	"koe/protocol"
	"koe/tts"
)

// A sentence whose engine streams (tts.StreamSynthesizer) goes out in
// parts while it is synthesised: the first once tts.stream_first_ms of it
// exists, then parts growing up to tts.stream_piece_ms. Each part is an
// audio message of its own with a complete WAV, so that a client plays
// them back to back as it plays sentences; the display text and actions
// ride on the first part only, and later parts carry none (no
// display_text), so that nothing is shown twice. The order of the reply
// is kept: the sender takes a sentence's parts as they come and moves to
// the next sentence only once the last part is out.

// streamer is the streaming half of tts.StreamSynthesizer, as a turn
// uses it.
type streamer interface {
	SynthesizeStream(ctx context.Context, text string) (*tts.Stream, error)
}

// part is one streamed piece of a sentence.
type part struct {
	msg protocol.Audio
	dur time.Duration
}

// partQueue holds a sentence's parts between its synthesis and the
// sender. It never blocks the synthesis: syntheses of later sentences run
// ahead of the sender, and one waiting for room while an earlier one waits
// for a synthesis slot would stall the reply.
type partQueue struct {
	more chan struct{} // a part was added (capacity 1); nil: not streamed

	mu    sync.Mutex
	queue []part
	added bool
}

func (q *partQueue) add(p part) {
	q.mu.Lock()
	q.queue = append(q.queue, p)
	q.added = true
	q.mu.Unlock()
	select {
	case q.more <- struct{}{}:
	default:
	}
}

// take returns the parts not taken yet.
func (q *partQueue) take() []part {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.queue
	q.queue = nil
	return out
}

// streamed reports whether any part was added: the piece's audio went (or
// goes) out in parts, not as one message.
func (q *partQueue) streamed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.added
}

// streaming reports whether this turn's sentences are streamed.
func (sp *speaker) streaming() bool {
	_, ok := sp.engine.(streamer)
	return ok && sp.char.TTS.StreamFirstMillis > 0
}

// awaitSlot waits until sl is complete, sending its parts as they come.
// It reports false once the turn has ended or a send failed.
func (sp *speaker) awaitSlot(sl *slot) bool {
	for {
		if !sp.sendParts(sl) {
			return false
		}
		select {
		case <-sl.ready:
			return true
		case <-sl.parts.more:
		case <-sp.ctx.Done():
			return false
		}
	}
}

// sendParts sends the parts of sl that have come since the last call.
func (sp *speaker) sendParts(sl *slot) bool {
	for _, p := range sl.parts.take() {
		if sp.ctx.Err() != nil || !sp.sendPiece(p.msg, p.dur) {
			return false
		}
	}
	return true
}

// stream synthesises text into sl's parts. It reports false when the
// engine does not stream (the caller synthesises the whole sentence).
func (sp *speaker) stream(sl *slot, text string) bool {
	st, ok := sp.engine.(streamer)
	if !ok || sl.parts.more == nil {
		return false
	}
	start := time.Now()
	s, err := st.SynthesizeStream(sp.ctx, text)
	if errors.Is(err, errors.ErrUnsupported) {
		return false
	}
	if err != nil {
		sp.synthFailed(text, err)
		return true
	}
	defer s.Close()
	c := newCutter(s.Rate, sp.char.TTS.StreamFirstMillis, sp.char.TTS.StreamPieceMillis)
	buf := make([]int16, c.slice*5)
	var (
		meter tts.VolumeMeter
		total time.Duration
		first time.Duration
	)
	emit := func(samples []int16) bool {
		a, err := tts.FromSamples(samples, s.Rate)
		if err != nil {
			sp.synthFailed(text, err)
			return false
		}
		b64 := base64.StdEncoding.EncodeToString(a.WAV)
		msg := protocol.Audio{
			Type:        protocol.TypeAudio,
			Audio:       &b64,
			Volumes:     meter.Volumes(samples, s.Rate, protocol.DefaultAudioSliceMillis),
			SliceLength: protocol.DefaultAudioSliceMillis,
		}
		if total == 0 {
			msg.DisplayText, msg.Actions = sl.msg.DisplayText, sl.msg.Actions
			first = time.Since(start)
		}
		total += a.Duration
		sl.parts.add(part{msg: msg, dur: a.Duration})
		return true
	}
	for {
		n, err := s.Read(buf)
		for _, piece := range c.add(buf[:n]) {
			if !emit(piece) {
				return true
			}
		}
		if errors.Is(err, io.EOF) {
			if rest := c.rest(); len(rest) > 0 {
				emit(rest)
			}
			break
		}
		if err != nil {
			// What was sent of the sentence stays sent; the rest is
			// lost, as a whole sentence's audio would be.
			sp.synthFailed(text, err)
			return true
		}
	}
	sp.s.log.Debug("synthesized as a stream", "runes", len([]rune(text)), "audio", total, "first", first, "took", time.Since(start))
	return true
}

// synthFailed reports a piece whose synthesis failed: it stays in the
// reply as text (or what was streamed of it), and the turn goes on.
func (sp *speaker) synthFailed(text string, err error) {
	if sp.ctx.Err() == nil {
		sp.s.log.Warn("speech synthesis failed; sending the piece as text", "text", quote.Shorten(text, 60), "err", err)
		sp.s.deps.Observer.DependencyFailed(ServiceTTS, err)
	}
}

// cutter cuts a sentence's samples into parts of whole lip-sync slices:
// the first of first ms, then each as long as all before it together, up
// to most ms. Growing so, a part is ready before the ones before it have
// played as long as the engine is at least twice as fast as real time
// (and from the third part on, a little faster than real time will do).
type cutter struct {
	slice       int // samples per lip-sync slice
	first, most int // samples
	target      int // the next part's length
	sent        int
	pending     []int16
}

func newCutter(rate, firstMillis, pieceMillis int) *cutter {
	slice := max(1, rate*protocol.DefaultAudioSliceMillis/1000)
	// Whole slices, rounded up: a part holds at least what was asked.
	whole := func(ms int) int { return max(slice, (rate*ms/1000+slice-1)/slice*slice) }
	c := &cutter{slice: slice, first: whole(firstMillis), most: whole(max(pieceMillis, firstMillis))}
	c.target = c.first
	return c
}

// add takes samples and returns the parts now complete.
func (c *cutter) add(samples []int16) [][]int16 {
	c.pending = append(c.pending, samples...)
	var out [][]int16
	for len(c.pending) >= c.target {
		// Each part gets its own array: it is encoded while the next
		// samples come in.
		out = append(out, append([]int16(nil), c.pending[:c.target]...))
		c.pending = append(c.pending[:0], c.pending[c.target:]...)
		c.sent += c.target
		c.target = min(c.most, max(c.first, c.sent))
	}
	return out
}

// rest returns what is left at the end of the sentence.
func (c *cutter) rest() []int16 {
	out := c.pending
	c.pending = nil
	return out
}
