package conversation

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"koe/agent"
	"koe/conversation/sentence"
	"koe/history"
	"koe/protocol"
)

// turn is one user input and everything koe sends in answer to it.
type turn struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	awaitingPlayback atomic.Bool
	playback         chan struct{}

	// replying is set once the turn has its input (a recording is
	// transcribed): from then on, speech over it is a barge-in.
	replying atomic.Bool

	sentMu    sync.Mutex
	sent      []sentPiece // the audio pieces sent so far, in order
	firstSent time.Time
}

type sentPiece struct {
	text string
	dur  time.Duration
}

// addSent records a piece once it is on its way to the client.
func (t *turn) addSent(text string, dur time.Duration) {
	t.sentMu.Lock()
	defer t.sentMu.Unlock()
	if len(t.sent) == 0 {
		t.firstSent = time.Now()
	}
	t.sent = append(t.sent, sentPiece{text, dur})
}

// heardText estimates what the user has heard of the reply when the
// server itself stops it (barge-in): pieces are sent well ahead of
// playback, so it counts the pieces that have started playing, assuming
// playback began when the first one was sent.
func (t *turn) heardText() string {
	t.sentMu.Lock()
	defer t.sentMu.Unlock()
	elapsed := time.Since(t.firstSent)
	var b strings.Builder
	var start time.Duration
	for _, p := range t.sent {
		if start > elapsed {
			break
		}
		b.WriteString(p.text)
		start += p.dur
	}
	return b.String()
}

func newTurn(parent context.Context) *turn {
	ctx, cancel := context.WithCancelCause(parent)
	return &turn{ctx: ctx, cancel: cancel, done: make(chan struct{}), playback: make(chan struct{}, 1)}
}

// playbackComplete counts only once backend-synth-complete is out: a late
// frame from the previous turn must not end this one early.
func (t *turn) playbackComplete() {
	if !t.awaitingPlayback.Load() {
		return
	}
	select {
	case t.playback <- struct{}{}:
	default:
	}
}

// turnSnapshot is what a turn needs of the session, read once at its start
// so that the turn never races with history or character switches (those
// stop the turn first).
type turnSnapshot struct {
	char   Character
	uid    string
	tts    Synthesizer
	ttsErr error // reported once per session, at its first turn
	// saved delivers the result of storing the human message. The write
	// runs alongside the LLM request instead of before it: a disk sync is
	// not worth delaying the first words for.
	saved chan error
}

// waitSaved waits for the human message to be stored and reports a failure
// to the client once. The turn calls it before storing the reply (records
// keep their order) and before it ends (the write has an owner).
func (s *Session) waitSaved(snap *turnSnapshot) {
	if snap.saved == nil {
		return
	}
	if err := <-snap.saved; err != nil {
		s.log.Error("could not save the user's message", "history_uid", snap.uid, "err", err)
		s.send(s.ctx, protocol.NewError("koe could not save your message to the history: "+err.Error()))
	}
	snap.saved = nil
}

// turnInput is what starts a turn.
type turnInput struct {
	text   string
	images []agent.Image
	// recording, if set, is a 16 kHz WAV to transcribe first.
	recording []byte
	// proactive: the AI speaks on its own; text is the instruction to it.
	proactive bool
}

func (s *Session) runTurn(t *turn, in turnInput) {
	var snap turnSnapshot
	defer func() {
		s.waitSaved(&snap)
		s.mu.Lock()
		if s.turn == t {
			s.turn = nil
		}
		s.mu.Unlock()
		t.cancel(nil)
		close(t.done)
	}()
	ctx := t.ctx
	s.send(ctx, protocol.Control(protocol.ControlChainStart))
	s.send(ctx, protocol.FullText(protocol.ThinkingText))
	if in.recording != nil {
		text, ok := s.transcribe(ctx, in.recording)
		if !ok {
			return
		}
		in.text = text
	}
	t.replying.Store(true)
	snap = s.beginTurn(in)
	if snap.ttsErr != nil {
		s.send(ctx, protocol.NewError("speech is off for this character, so replies come as text only: "+snap.ttsErr.Error()))
	}

	em := s.newEmitter(t, snap)
	err := s.currentAgent().Reply(ctx, em)
	if ctx.Err() == nil {
		em.flush()
	}
	spoken := em.speaker.finish()
	if ctx.Err() != nil {
		s.finishCancelled(t, &snap, em.reply.String(), false)
		return
	}
	if err != nil {
		s.log.Warn("LLM call failed", "conf_uid", snap.char.ConfUID, "err", err)
		if partial := em.reply.String(); partial != "" {
			s.persistReply(&snap, partial, false)
		}
		s.failTurn(ctx, err.Error())
		return
	}
	reply := em.reply.String()
	// Armed before the frame goes out: a fast client answers before
	// SendWait returns. The frame follows every audio message in the
	// queue, so it is written only after the last of them.
	t.awaitingPlayback.Store(true)
	if err := s.out.SendWait(ctx, simple(protocol.TypeBackendSynthComplete)); err != nil {
		s.finishCancelled(t, &snap, reply, true)
		return
	}

	// The client may still be playing everything that was sent.
	wait := spoken + s.deps.Config.PlaybackTimeout
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-t.playback:
	case <-timer.C:
		s.log.Debug("no frontend-playback-complete; ending the turn anyway", "waited", wait)
	case <-ctx.Done():
		s.finishCancelled(t, &snap, reply, true)
		return
	}
	// Stored before chain-end so that a client asking for the history right
	// after the turn already finds the reply.
	s.persistReply(&snap, reply, false)
	s.sendMemoryState()
	s.endChain(ctx)
}

// endChain closes the turn for the client. It waits for the write: the
// turn's context ends when runTurn returns, and frames still queued then
// would be dropped.
func (s *Session) endChain(ctx context.Context) {
	s.send(ctx, simple(protocol.TypeForceNewMessage))
	if err := s.out.SendWait(ctx, protocol.Control(protocol.ControlChainEnd)); err != nil {
		s.log.Debug("chain-end not sent", "err", err)
	}
}

// beginTurn adds the user's message to memory and starts storing it,
// creating the history with it when there is none yet.
func (s *Session) beginTurn(in turnInput) turnSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := history.Record{Role: history.RoleHuman, Content: in.text, Name: s.char.HumanName}
	for _, img := range in.images {
		rec.Images = append(rec.Images, history.Image{Source: img.Source, MimeType: img.MimeType, Data: img.Data})
	}
	if in.proactive {
		// The instruction is kept for the model, hidden from the chat.
		rec = history.Record{Role: history.RoleSystem, Name: proactiveName, Content: in.text}
	}
	conf, uid := s.char.ConfUID, s.historyUID
	var save func() error
	if uid == "" {
		uid = history.NewUID(time.Now())
		save = func() error { return s.deps.Store.CreateWith(conf, uid, rec) }
		s.agent.SetThread(agent.Thread{ConfUID: conf, HistoryUID: uid})
	} else {
		save = func() error { return s.deps.Store.Append(conf, uid, rec) }
	}
	s.historyUID, s.historyUsed = uid, true
	s.agent.AddUser(in.text, in.images...)
	snap := turnSnapshot{char: s.char, uid: uid, tts: s.tts, ttsErr: s.ttsErr, saved: make(chan error, 1)}
	s.ttsErr = nil
	go func() { snap.saved <- save() }()
	return snap
}

func (s *Session) currentAgent() *agent.Agent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agent
}

// failTurn reports err and closes the chain so the client returns to idle
// and the session stays usable.
func (s *Session) failTurn(ctx context.Context, message string) {
	s.send(ctx, protocol.NewError(message))
	s.endChain(ctx)
}

// finishCancelled persists what a stopped turn leaves behind: the heard part
// after an interrupt, otherwise what was generated (complete or cut short).
func (s *Session) finishCancelled(t *turn, snap *turnSnapshot, generated string, complete bool) {
	var ic interruptCause
	if errors.As(context.Cause(t.ctx), &ic) {
		if ic.heard != "" || generated != "" {
			s.persistReply(snap, ic.heard, true)
		}
		return
	}
	if generated != "" {
		s.persistReply(snap, generated, !complete)
	}
}

// persistReply writes the AI message to history and memory. It runs on the
// session's context, not the turn's: a stopped turn still saves its reply.
func (s *Session) persistReply(snap *turnSnapshot, text string, interrupted bool) {
	s.waitSaved(snap)
	rec := history.Record{Role: history.RoleAI, Content: text, Name: snap.char.Name, Avatar: snap.char.Avatar, Interrupted: interrupted}
	if err := s.deps.Store.Append(snap.char.ConfUID, snap.uid, rec); err != nil {
		s.log.Error("could not save the reply", "history_uid", snap.uid, "err", err)
		s.send(s.ctx, protocol.NewError("koe could not save the reply to the history: "+err.Error()))
	}
	s.currentAgent().AddAssistant(text, interrupted)
}

func (s *Session) send(ctx context.Context, msg any) {
	if err := s.out.Send(ctx, msg); err != nil && ctx.Err() == nil {
		s.log.Debug("message not queued", "err", err)
	}
}

func simple(typ string) protocol.Simple { return protocol.Simple{Type: typ} }

// turnEmitter receives the LLM stream: it forwards each delta as a token
// message and hands each finished piece to the speaker.
type turnEmitter struct {
	s        *Session
	ctx      context.Context
	reply    strings.Builder
	splitter *sentence.Splitter
	speaker  *speaker
	pieces   []sentence.Piece // reused between deltas
}

func (s *Session) newEmitter(t *turn, snap turnSnapshot) *turnEmitter {
	ctx := t.ctx
	s.mu.Lock()
	emotions := s.emotions
	s.mu.Unlock()
	cfg := s.deps.Config
	return &turnEmitter{
		s:   s,
		ctx: ctx,
		splitter: sentence.New(sentence.Options{
			FasterFirstResponse: cfg.FasterFirstResponse,
			FirstPieceMaxWords:  cfg.FirstPieceMaxWords,
			Emotions:            emotions,
		}),
		speaker: newSpeaker(s, t, snap.tts, snap.char, cfg.SpeechConcurrency),
	}
}

func (e *turnEmitter) Token(delta string) {
	e.reply.WriteString(delta)
	e.s.send(e.ctx, protocol.Token{Type: protocol.TypeToken, Content: delta})
	e.pieces = e.splitter.Push(e.pieces[:0], delta)
	for _, p := range e.pieces {
		e.speaker.add(p)
	}
}

// flush hands over the unfinished tail once the stream has ended.
func (e *turnEmitter) flush() {
	e.pieces = e.splitter.Flush(e.pieces[:0])
	for _, p := range e.pieces {
		e.speaker.add(p)
	}
}
