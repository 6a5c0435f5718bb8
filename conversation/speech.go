package conversation

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"time"

	"koe/conversation/sentence"
	"koe/protocol"
	"koe/tts"
)

// Synthesizer is the speech engine as a turn uses it.
type Synthesizer interface {
	Synthesize(ctx context.Context, text string) (tts.Audio, error)
}

// speaker turns a reply's pieces into audio messages: syntheses run
// concurrently (bounded), messages go out strictly in piece order. It is
// owned by one turn; everything it starts stops when the turn's context
// ends, and wait returns only once it has.
type speaker struct {
	s       *Session
	turn    *turn
	ctx     context.Context
	engine  Synthesizer // nil: every piece is sent as text only
	char    Character
	emotion map[string]any // keyword → expression, from the model's emotionMap
	sem     chan struct{}  // this turn's own bound
	limit   *workSlots     // the server-wide bound
	count   int            // pieces added so far

	slots  chan *slot
	synths sync.WaitGroup
	sent   chan struct{}
	spoken time.Duration // total audio sent; read after sent is closed
	// stopped: without an engine, pieces are sent at once by add, and a
	// failed send (the turn or the connection ended) stops the rest.
	stopped bool
	// watch measures the turn (its first audio) for the operator.
	watch *turnWatch
}

// slot is one piece's place in the reply's order, or another message's
// that must go out in that order (other set: a tool's status). A piece
// whose speech is streamed goes out as parts while it is synthesised
// (speech_stream.go); ready closes once nothing more will come.
type slot struct {
	ready chan struct{}
	msg   protocol.Audio
	dur   time.Duration
	other any
	parts partQueue
}

func newSpeaker(s *Session, t *turn, c cast, concurrency int, watch *turnWatch) *speaker {
	sp := &speaker{
		watch:   watch,
		s:       s,
		turn:    t,
		limit:   s.hub.speech,
		ctx:     t.ctx,
		engine:  c.tts,
		char:    c.char,
		emotion: c.emotion,
	}
	if sp.engine == nil {
		// Text only: every piece is ready when it is cut, so add sends
		// it in order itself, with no sender goroutine between.
		return sp
	}
	sp.sem = make(chan struct{}, max(concurrency, 1))
	// Room for a long reply's pieces; if the sender falls this far
	// behind, add blocks and the LLM stream waits for speech to catch up.
	sp.slots = make(chan *slot, 256)
	sp.sent = make(chan struct{})
	go sp.sendInOrder()
	return sp
}

// add queues a piece: its synthesis starts now, its message goes out after
// every earlier piece's.
func (sp *speaker) add(p sentence.Piece) {
	if sp.engine == nil {
		sp.sendNow(sp.message(p))
		return
	}
	sl := &slot{ready: make(chan struct{}), msg: sp.message(p)}
	if p.Speech == "" {
		close(sl.ready)
	} else {
		if sp.streaming() {
			sl.parts.more = make(chan struct{}, 1)
		}
		sp.synths.Add(1)
		go sp.synthesize(sl, p.Speech, sp.count == 0)
	}
	sp.count++
	select {
	case sp.slots <- sl:
	case <-sp.ctx.Done():
	}
}

func (sp *speaker) synthesize(sl *slot, text string, first bool) {
	defer sp.synths.Done()
	defer close(sl.ready)
	select {
	case sp.sem <- struct{}{}:
		defer func() { <-sp.sem }()
	case <-sp.ctx.Done():
		return
	}
	if sp.limit.acquire(sp.ctx, first) != nil {
		return
	}
	defer sp.limit.release()
	start := time.Now()
	if sp.stream(sl, text) {
		return
	}
	audio, err := sp.engine.Synthesize(sp.ctx, text)
	if err != nil {
		sp.synthFailed(text, err)
		return
	}
	b64 := base64.StdEncoding.EncodeToString(audio.WAV)
	sl.msg.Audio = &b64
	sl.msg.Volumes = tts.Volumes(audio.Samples, audio.SampleRate, protocol.DefaultAudioSliceMillis)
	sl.dur = audio.Duration
	sp.s.log.Debug("synthesized", "runes", len([]rune(text)), "audio", audio.Duration, "took", time.Since(start))
}

// addMessage queues a message that is not speech after every piece added
// so far, so that a client sees it where it belongs in the reply.
func (sp *speaker) addMessage(msg any) {
	if sp.engine == nil {
		if !sp.stopped && (sp.ctx.Err() != nil || sp.s.emit(sp.ctx, msg) != nil) {
			sp.stopped = true
		}
		return
	}
	sl := &slot{ready: make(chan struct{}), other: msg}
	close(sl.ready)
	select {
	case sp.slots <- sl:
	case <-sp.ctx.Done():
	}
}

// sendNow sends a text-only piece from the caller's goroutine.
func (sp *speaker) sendNow(msg protocol.Audio) {
	if sp.stopped {
		return
	}
	if sp.ctx.Err() != nil || sp.s.emit(sp.ctx, msg) != nil {
		sp.stopped = true
		return
	}
	sp.turn.addSent(msg.DisplayText.Text, 0)
}

// sendInOrder is the speaker's one sender: it waits for each slot in turn.
func (sp *speaker) sendInOrder() {
	defer close(sp.sent)
	for sl := range sp.slots {
		if !sp.awaitSlot(sl) {
			return
		}
		if sl.other != nil {
			if err := sp.s.emit(sp.ctx, sl.other); err != nil {
				return
			}
			continue
		}
		if sl.parts.streamed() {
			// Its parts went out as they came; ready is closed, so
			// this takes the last of them.
			if !sp.sendParts(sl) {
				return
			}
			continue
		}
		if !sp.sendPiece(sl.msg, sl.dur) {
			return
		}
	}
}

// sendPiece sends one audio message and notes it as sent.
func (sp *speaker) sendPiece(msg protocol.Audio, dur time.Duration) bool {
	if err := sp.s.emit(sp.ctx, msg); err != nil {
		return false
	}
	sp.turn.addSent(msg.DisplayText.Text, dur)
	sp.spoken += dur
	if msg.Audio != nil {
		sp.watch.firstAudio()
	}
	return true
}

// finish waits until every piece has been sent (or the turn was stopped)
// and returns the total duration of the audio sent.
func (sp *speaker) finish() time.Duration {
	if sp.engine == nil {
		return 0 // everything was sent by add
	}
	close(sp.slots)
	<-sp.sent
	sp.synths.Wait()
	return sp.spoken
}

// message builds a piece's audio message, silent until synthesis fills it.
func (sp *speaker) message(p sentence.Piece) protocol.Audio {
	msg := protocol.Audio{
		Type:        protocol.TypeAudio,
		Volumes:     []float64{},
		SliceLength: protocol.DefaultAudioSliceMillis,
		DisplayText: protocol.DisplayText{Text: displayText(p), Name: sp.char.Name, Avatar: sp.char.Avatar},
	}
	var expressions []any
	for _, e := range p.Emotions {
		if v, ok := sp.emotion[strings.ToLower(e)]; ok {
			expressions = append(expressions, v)
		}
	}
	if len(expressions) > 0 {
		msg.Actions = &protocol.Actions{Expressions: expressions}
	}
	return msg
}

// displayText is what the client shows for a piece: the streamed text as
// is, except that a think block reads as a parenthesised aside.
func displayText(p sentence.Piece) string {
	if !p.Think {
		return p.Display
	}
	r := strings.NewReplacer("<think>", "(", "</think>", ")")
	return r.Replace(p.Display)
}

// emotionMap reads the Live2D model's emotionMap (keyword → expression).
func emotionMap(modelInfo map[string]any) map[string]any {
	out := map[string]any{}
	raw, _ := modelInfo["emotionMap"].(map[string]any)
	for k, v := range raw {
		out[strings.ToLower(k)] = v
	}
	return out
}

// emotionKeywords lists the keywords the splitter should recognise.
func emotionKeywords(modelInfo map[string]any) []string {
	m := emotionMap(modelInfo)
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
