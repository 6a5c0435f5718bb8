package conversation

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"koe"
	"koe/agent"
	"koe/conversation/sentence"
	"koe/histories"
	"koe/protocol"
)

// turnInput is what starts a turn.
type turnInput struct {
	text   string
	images []agent.Image
	// recording, if set, is a 16 kHz WAV to transcribe first.
	recording []byte
	// proactive: the AI speaks on its own; text is the instruction to it.
	proactive bool
	// viewers: a live chat turn answers them (their display names); its
	// watchers are told at the chain's start.
	viewers []string
	// group: the turn is a character's reply in a round (group_round.go),
	// which learns from it what was said.
	group *groupTurnState
	// resume: no new user message; the turn goes on from the client's
	// tool results (see clienttools.go). tools, if set, are the client's
	// tools of this turn instead of the session's.
	resume bool
	tools  *agent.ClientTools
	// reply changes this turn's LLM requests (a Realtime response's
	// instructions, temperature, length).
	reply agent.ReplyOptions
	// silent: the turn is answered in text only, though the session
	// speaks (a Realtime response with output_modalities ["text"]).
	silent bool
}

// startText cancels the running turn, if any, and starts a new one.
func (s *Session) startText(text string, images []protocol.Image) error {
	imgs, err := validateImages(images, s.deps.Config)
	if err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" && len(imgs) == 0 {
		return invalid("empty input: type something first")
	}
	return s.startInput(turnInput{text: text, images: imgs})
}

// startInput starts a turn for the client's input, or refuses it with
// koe.ErrRestarting once the session drains.
func (s *Session) startInput(in turnInput) error {
	if g := s.inGroup(); g != nil && !in.proactive {
		return s.sayToGroup(g, in)
	}
	if s.start(in) == nil {
		return koe.ErrRestarting
	}
	return nil
}

// start runs a turn for in, or returns nil once the session drains (see
// Drain).
func (s *Session) start(in turnInput) *turn {
	if s.headless {
		return s.turns.start(s.ctx, func(t *turn) { s.runTurn(t, in) })
	}
	if s.turns.isDraining() {
		return nil // before the live session is told to give way
	}
	// The character's live session gives way, and waits for this turn
	// (live.go). A character switch stops the turn first, so its
	// character stays the same throughout.
	conf := s.Character().ConfUID
	s.hub.yieldLive(conf)
	s.hub.characters.started(conf)
	t := s.turns.start(s.ctx, func(t *turn) {
		defer s.hub.characters.ended(conf)
		s.runTurn(t, in)
	})
	if t == nil {
		s.hub.characters.ended(conf)
	}
	return t
}

// Drain makes the session start no turn from now on: an input that would
// start one is refused with koe.ErrRestarting, before anything of it is
// stored. It reports whether a turn is running; if one is, it runs to its
// end and idle is called once it has stored its records (from the turn's
// goroutine: idle must not block). The server calls it when koe drains
// before a restart.
func (s *Session) Drain(idle func()) bool { return s.turns.drain(idle) }

// interrupt stops the running turn at once. heard is what the user actually
// heard of the reply; memory and history keep only that.
func (s *Session) interrupt(heard string) {
	if s.interruptGroup(heard) {
		return
	}
	if !s.turns.stop(interruptCause{heard: heard}) {
		s.log.Debug("interrupt with no running turn")
	}
}

// playbackComplete records that the client played the whole turn. Clients
// send it several times per turn; only the first one counts.
func (s *Session) playbackComplete() {
	if t := s.turns.running(); t != nil {
		t.playbackComplete()
	}
	// A group member's client played another character's reply.
	s.listening.Load().played(s)
}

// turnState is what a turn works with, taken once at its start so that it
// never races with history or character switches (those stop the turn
// first).
type turnState struct {
	s      *Session
	cast   cast
	conf   string
	uid    string
	ttsErr error // reported once per session, at its first turn
	// saved delivers the result of storing the human message and then
	// the turn's tool steps, in order (see later). The writes run
	// alongside the LLM request instead of before it: a disk sync is not
	// worth delaying the first words for.
	saved chan error
	// final is the part of a reply's text that memory keeps as the
	// turn's answer (what cycles that called tools said is kept with
	// their calls); nil: all of it.
	final func(string) string
	// run is the turn's run_id; cycle is how its latest LLM call ended.
	run   string
	cycle agent.CycleResult
	// docs are the numbered documents the turn's requests held, which
	// the reply may cite as [n].
	docs map[int]agent.Document
	// lease is the turn's hold on its history (running.go).
	lease Lease
	// unsaved: a record of the turn could not be stored.
	unsaved bool
	// group: the turn is a reply in a round, told what was said.
	group *groupTurnState
	// settled are the client's tool results (and the closed calls) the
	// turn began with; clientCalls: it ended handing calls to the client,
	// so it has no answer of its own to store.
	settled     []koe.Record
	clientCalls bool
}

func (s *Session) runTurn(t *turn, in turnInput) {
	var st turnState
	watch := newTurnWatch(s.deps.Observer)
	s.setTurnLog(slog.String("turn_id", t.id))
	defer s.setTurnLog()
	defer watch.endStopped(t.ctx)
	defer s.afterTurn(t, &st)
	ctx := t.ctx
	start := protocol.Control(protocol.ControlChainStart)
	start.Viewers = in.viewers
	s.send(ctx, start)
	s.send(ctx, protocol.FullText(protocol.ThinkingText))
	if in.recording != nil {
		typed := strings.TrimSpace(in.text)
		// Typed words that came with the recording (a Realtime client's
		// text and audio messages answered together) come first, as
		// they were sent, and are answered even if it holds no words.
		text, ok := s.transcribe(ctx, in.recording, watch, typed != "")
		if !ok {
			return
		}
		in.text = strings.TrimSpace(typed + "\n" + text)
	}
	t.replying.Store(true)
	st, err := s.beginTurn(t, in)
	if errors.Is(err, ErrOvertaken) {
		// Taken over before it began: its client is told to stop.
		s.finishCancelled(t, &st, "", false)
		return
	}
	if err != nil {
		t.err = err
		s.failTurn(ctx, Explain(err).Message)
		return
	}
	s.setTurnLog(slog.String("history_uid", st.uid), slog.String("turn_id", t.id))
	if st.ttsErr != nil {
		s.send(ctx, protocol.NewError("speech is off for this character, so replies come as text only: "+st.ttsErr.Error()))
	}
	s.showResults(ctx, &st)
	if !in.proactive && !in.resume {
		s.message(ctx, protocol.ChatMessage{Type: protocol.MessageHuman, Content: in.text, Name: st.cast.char.HumanName, RunID: t.id,
			AdditionalKwargs: protocol.AdditionalKwargs{ConfUID: st.conf, HistoryUID: st.uid}})
	}

	if in.silent {
		// This turn only: the session's engine stays for the next.
		st.cast.tts = nil
	}
	em := newTurnEmitter(s, t, st.cast, watch)
	em.st = &st
	st.final = em.final
	err = st.cast.agent.ReplyWith(agent.WithReplyOptions(ctx, in.reply), em, turnTools(in))
	if ctx.Err() == nil {
		em.flush()
	}
	spoken := em.speaker.finish()
	if ctx.Err() != nil {
		s.finishCancelled(t, &st, em.reply.String(), false)
		return
	}
	if err != nil {
		t.err = err
		logFailure(s.log, "LLM call failed", err, "conf_uid", st.conf)
		s.deps.Observer.DependencyFailed(ServiceLLM, err)
		watch.end(TurnFailed)
		// What was said before the failure is kept, marked as cut short.
		if partial := em.reply.String(); partial != "" {
			st.persistReply(partial, true)
		}
		t.finishing.Store(true)
		s.failTurn(ctx, Explain(err).Message)
		return
	}
	reply := em.reply.String()
	// Armed before the frame goes out: a fast client answers before
	// SendWait returns. The frame follows every audio message in the
	// queue, so it is written only after the last of them.
	t.awaitingPlayback.Store(true)
	s.audience.Load().arm()
	// Everything the turn says is on its way: the client's next turn
	// (a Realtime client starts one at response.done) leaves its
	// watchers their copies (newTurn).
	t.sentAll.Store(true)
	if err := s.emitWait(ctx, protocol.Simple{Type: protocol.TypeBackendSynthComplete}); err != nil {
		s.finishCancelled(t, &st, reply, true)
		return
	}

	// The client may still be playing everything that was sent; a client
	// that reads text plays nothing.
	if s.headless || s.playsItself {
		// Its audience is still hearing it: a stop now (a skip, the
		// streamer's own turn) cuts it off as an interrupt would. A
		// client playing on its own clock (Realtime) says nothing of
		// its playback but may cut it short (a barge-in, a truncate)
		// until it has had the time to play: the reply is stored then.
		if waitSpoken(ctx, t, spoken); ctx.Err() != nil && !s.supersededWhole(t) {
			s.finishCancelled(t, &st, reply, true)
			return
		}
	} else if !s.textOnly && !s.playsItself {
		wait := spoken + s.deps.Config.PlaybackTimeout
		timer := time.NewTimer(wait)
		defer timer.Stop()
		// In a round, every member's client plays the reply: the next
		// character starts once all of them have played it.
		own, others := t.playback, s.audience.Load().allPlayedCh()
	wait:
		for own != nil || others != nil {
			select {
			case <-own:
				own = nil
			case <-others:
				others = nil
			case <-timer.C:
				s.log.Debug("no frontend-playback-complete; ending the turn anyway", "waited", wait)
				break wait
			case <-ctx.Done():
				s.finishCancelled(t, &st, reply, true)
				return
			}
		}
	}
	// Stored before chain-end so that a client asking for the history right
	// after the turn already finds the reply.
	st.persistReply(reply, false)
	if s.koeEvents {
		// Only a koe client takes it (see Notify); the state splits the
		// whole history into turns, under the agent's lock, for nothing
		// when the client is OLV's.
		s.Notify(memoryStateMessage(st.cast.agent.State()))
	}
	t.finishing.Store(true)
	if st.unsaved {
		watch.end(TurnUnsaved)
	} else {
		watch.end(TurnCompleted)
	}
	s.endChain(ctx)
}

// afterTurn ends every turn: its records are stored (or their failure
// told), memory notes the history's newest record, and the history is
// free for the next turn, whichever session runs it.
func (s *Session) afterTurn(t *turn, st *turnState) {
	st.waitSaved()
	if st.uid == "" {
		return
	}
	defer s.hub.releaseHistory(st.uid, t, st.lease)
	seq, err := s.deps.Store.LastSeq(s.ctx, st.conf, st.uid)
	if err != nil {
		// Memory is read again at the next turn.
		s.log.Debug("could not read the history's newest record", "err", err)
		return
	}
	s.mu.Lock()
	if s.place.uid == st.uid {
		s.place.seen = seq
	}
	s.mu.Unlock()
}

// endChain closes the turn for the client. It waits for the write: the
// turn's context ends when runTurn returns, and frames still queued then
// would be dropped.
func (s *Session) endChain(ctx context.Context) {
	s.send(ctx, protocol.Simple{Type: protocol.TypeForceNewMessage})
	if err := s.emitWait(ctx, protocol.Control(protocol.ControlChainEnd)); err != nil {
		s.log.Debug("chain-end not sent", "err", err)
	}
}

// failTurn reports message and closes the chain so the client returns to
// idle and the session stays usable.
func (s *Session) failTurn(ctx context.Context, message string) {
	s.send(ctx, protocol.NewError(message))
	s.endChain(ctx)
}

// beginTurn adds the user's message to memory and starts storing it,
// creating the history with it when there is none yet. The history is the
// turn's from here on: a turn another session runs in it is stopped first,
// and memory is read again if the history moved on since it was read.
func (s *Session) beginTurn(t *turn, in turnInput) (turnState, error) {
	rec := koe.Record{Role: koe.RoleHuman, Content: in.text}
	for _, img := range in.images {
		rec.Images = append(rec.Images, koe.Image{Source: img.Source, MimeType: img.MimeType, Data: img.Data})
	}
	s.mu.Lock()
	c := s.cast
	fresh := s.place.uid == ""
	if fresh {
		s.place.uid = koe.NewHistoryUID(time.Now())
	}
	s.place.used = true
	uid, seen := s.place.uid, s.place.seen
	// The engine's failure is told once per cast, at its first turn.
	s.cast.ttsErr = nil
	s.mu.Unlock()

	conf := c.char.ConfUID
	if in.resume && fresh {
		s.mu.Lock()
		if s.place.uid == uid {
			s.place.uid = ""
		}
		s.mu.Unlock()
		return turnState{}, errNothingToContinue
	}
	lease, err := s.hub.takeOver(uid, t)
	if err != nil {
		if fresh {
			// The history was never created: the next turn starts one.
			s.mu.Lock()
			if s.place.uid == uid {
				s.place.uid = ""
			}
			s.mu.Unlock()
		}
		return turnState{}, err
	}
	var settled []koe.Record
	if !fresh {
		s.refreshMemory(c, conf, uid, seen)
		settled = s.settleCalls(c)
	}
	if in.resume && len(settled) == 0 {
		s.hub.releaseHistory(uid, t, lease)
		return turnState{}, errNothingToContinue
	}
	rec.Name = c.char.HumanName
	if in.proactive {
		// The instruction is kept for the model, hidden from the chat.
		rec = koe.Record{Role: koe.RoleSystem, Name: koe.NameProactive, Content: in.text}
	}
	// The user's words are stored even if the turn is stopped at once.
	saveCtx := context.WithoutCancel(s.ctx)
	save := func() error { return s.deps.Store.Append(saveCtx, conf, uid, rec) }
	if fresh {
		save = func() error { return s.deps.Store.CreateWith(saveCtx, conf, uid, rec) }
		c.agent.SetThread(agent.Thread{ConfUID: conf, HistoryUID: uid})
	}
	if rec.Role == koe.RoleHuman {
		store := save
		save = func() error {
			err := store()
			if err == nil {
				s.deps.noted(conf, uid)
			}
			return err
		}
	}
	if in.resume {
		save = func() error { return nil }
	}
	if len(settled) > 0 {
		// Results and closed calls go before the turn's own record: a
		// result follows its call.
		store := save
		save = func() error {
			for _, r := range settled {
				if err := s.deps.Store.Append(saveCtx, conf, uid, r); err != nil {
					return err
				}
			}
			return store()
		}
	}
	if !in.resume {
		c.agent.AddUser(in.text, in.images...)
	}
	st := turnState{s: s, cast: c, conf: conf, uid: uid, ttsErr: c.ttsErr, saved: make(chan error, 1), run: t.id, lease: lease, settled: settled, group: in.group}
	go func() { st.saved <- save() }()
	return st, nil
}

// refreshMemory reads the history into memory again when its newest
// stored record is not the one memory has: another session (a chat API
// request, another tab) talked in it since.
func (s *Session) refreshMemory(c cast, conf, uid string, seen uint64) {
	last, err := s.deps.Store.LastSeq(s.ctx, conf, uid)
	if err != nil || last == seen {
		// A history that cannot be read fails at the turn's first write.
		return
	}
	if _, _, err := s.readMemory(c, conf, uid); err != nil {
		s.log.Warn("could not read the history again; memory may miss its newest turns", "err", err)
		return
	}
	s.log.Debug("history changed elsewhere; memory read again")
}

// later stores rec after every record of the turn written so far, off the
// turn's path. After a failed write the rest are not written: a history
// must not hold a tool result without its call.
func (st *turnState) later(rec koe.Record) {
	prev, next := st.saved, make(chan error, 1)
	st.saved = next
	store, ctx := st.s.deps.Store, context.WithoutCancel(st.s.ctx)
	go func() {
		err := <-prev
		if err == nil {
			err = store.Append(ctx, st.conf, st.uid, rec)
		}
		next <- err
	}()
}

// waitSaved waits for the turn's records so far to be stored and reports a
// failure to the client once. The turn calls it before storing the reply
// (records keep their order) and before it ends (the writes have an owner).
func (st *turnState) waitSaved() {
	if st.saved == nil {
		return
	}
	if err := <-st.saved; err != nil {
		st.unsaved = true
		s := st.s
		s.log.Error("could not save the turn to the history", "err", err)
		s.send(s.ctx, protocol.NewError("koe could not save your message to the history; the reason is in its log"))
	}
	st.saved = nil
}

// finishCancelled persists what a stopped turn leaves behind: the heard part
// after an interrupt, otherwise what was generated (complete or cut short).
// A client whose turn was stopped from outside (a stop request, another
// client's turn in the same history) is told to stop playing. A headless
// session's audience heard what had had the time to play.
func (s *Session) finishCancelled(t *turn, st *turnState, generated string, complete bool) {
	cause := context.Cause(t.ctx)
	if !stoppedFromOutside(cause) {
		// Its client stopped playing on its own (it interrupted, sent
		// something new, switched or left); its watchers only learn it
		// here. (Stopped from outside, both are told below.)
		s.hub.watch.offer(s, context.Background(), protocol.Control(protocol.ControlInterrupt))
	}
	var ic interruptCause
	var bc *bargeInCause
	switch {
	case errors.As(cause, &bc):
		if heard := s.awaitHeard(t, bc); heard != "" || generated != "" {
			st.persistReply(heard, true)
		}
		return
	case errors.As(cause, &ic):
		if ic.heard != "" || generated != "" {
			st.persistReply(ic.heard, true)
		}
		return
	case stoppedFromOutside(cause) || s.headless:
		if !s.headless {
			// Not bound to the session's context: a chat API turn's
			// ends as soon as its stream has written the end, and the
			// watchers' copies still queued then would be dropped.
			s.send(context.WithoutCancel(s.ctx), protocol.Control(protocol.ControlInterrupt))
		}
		if st.cast.tts != nil {
			// What the client had played of it when it was told.
			if heard := t.heardText(); heard != "" || generated != "" {
				st.persistReply(heard, true)
			}
			return
		}
	}
	if generated != "" {
		st.persistReply(generated, !complete)
	}
}

// supersededWhole reports whether t was stopped only by its client's next
// turn once it had said everything, in a session whose client plays on its
// own clock: a Realtime client that starts its next response had the whole
// reply (response.done) and keeps it unless it truncates, so the turn ends
// as a completed one, for its watchers and metrics too (its end is told
// them on their own context: see newTurn).
func (s *Session) supersededWhole(t *turn) bool {
	return s.playsItself && t.sentAll.Load() && errors.Is(context.Cause(t.ctx), errSuperseded)
}

// persistReply writes the AI message to history and memory. It runs on the
// session's context, not the turn's: a stopped turn still saves its reply.
// A complete reply with no text is not stored: there is nothing to show.
func (st *turnState) persistReply(text string, interrupted bool) {
	st.waitSaved()
	s := st.s
	if text == "" && !interrupted || st.clientCalls {
		// A turn that handed calls to the client has no answer yet: what
		// it said is stored with its calls, and the turn that reads
		// their results answers.
		return
	}
	ch := st.cast.char
	if st.group != nil {
		st.group.keep(s.ctx, s.log, text)
	}
	rec := koe.Record{Role: koe.RoleAI, Content: text, Name: ch.Name, Avatar: ch.Avatar, Interrupted: interrupted}
	if err := s.deps.Store.Append(context.WithoutCancel(s.ctx), st.conf, st.uid, rec); err != nil {
		st.unsaved = true
		s.log.Error("could not save the reply", "err", err)
		s.send(s.ctx, protocol.NewError("koe could not save the reply to the history; the reason is in its log"))
	} else {
		s.deps.noted(st.conf, st.uid)
	}
	if st.final != nil {
		text = st.final(text)
	}
	st.cast.agent.AddAssistant(text, interrupted)
	answer := protocol.ChatMessage{Type: protocol.MessageAI, Content: text, Name: ch.Name, RunID: st.run,
		ResponseMetadata: responseMetadata(st.cycle),
		AdditionalKwargs: protocol.AdditionalKwargs{ConfUID: st.conf, HistoryUID: st.uid, Interrupted: interrupted}}
	if interrupted {
		answer.ResponseMetadata.FinishReason = finishInterrupted
	}
	// Sent even when the session's context has ended (the server is
	// shutting down): a client still connected learns what was stored.
	s.message(context.WithoutCancel(s.ctx), answer)
	if cited := citations(text, st.docs); len(cited) > 0 {
		s.send(context.WithoutCancel(s.ctx), protocol.Citations{Type: protocol.TypeCitations, HistoryUID: st.uid, RunID: st.run, Citations: cited})
	}
}

// finishInterrupted is the finish reason of a reply koe cut short.
const finishInterrupted = "interrupted"

// logFailure logs a failure the client is told about: at warn level with
// its details when it is a dependency's (the client heard the cause), at
// error level when it is koe's own.
func logFailure(log *slog.Logger, what string, err error, attrs ...any) {
	attrs = append(attrs, "err", err)
	if isInternal(err) {
		log.Error(what, attrs...)
		return
	}
	log.Warn(what, attrs...)
}

// turnEmitter receives the LLM stream: it forwards each delta as a token
// message (to clients that asked for them) and hands each finished piece
// to the speaker.
type turnEmitter struct {
	s        *Session
	ctx      context.Context
	reply    strings.Builder
	splitter *sentence.Splitter
	speaker  *speaker
	pieces   []sentence.Piece // reused between deltas
	// beforeTools is what was said in cycles that called tools: spoken
	// and stored in the history with the reply, but already in memory
	// with those calls.
	beforeTools string
	// newCycle: the next delta starts a cycle after tools ran; models
	// start it without the space that would separate it in the text.
	newCycle bool
	charName string
	model    string
	filler   string // tools.spoken_filler
	// st is the turn's state, for storing its tool steps in order.
	st *turnState
	// watch measures the turn for the operator.
	watch *turnWatch
}

func newTurnEmitter(s *Session, t *turn, c cast, watch *turnWatch) *turnEmitter {
	cfg := s.deps.Config
	return &turnEmitter{
		s:        s,
		ctx:      t.ctx,
		charName: c.char.Name,
		model:    c.char.LLM.Model,
		filler:   c.char.Tools.SpokenFiller,
		splitter: sentence.New(sentence.Options{
			FasterFirstResponse: cfg.FasterFirstResponse,
			FirstPieceMaxWords:  cfg.FirstPieceMaxWords,
			MaxPieceRunes:       cfg.MaxPieceChars,
			Emotions:            c.emotions,
			// Speech starts as soon as a piece is certain to be over,
			// not one token later.
			CutAtDeltaEnd: true,
		}),
		watch:   watch,
		speaker: newSpeaker(s, t, c, cfg.SpeechConcurrency, watch),
	}
}

func (e *turnEmitter) Token(delta string) {
	e.watch.firstToken()
	sep := ""
	if e.newCycle {
		e.newCycle = false
		sep = histories.Separator(e.reply.String(), delta)
	}
	if e.reply.Cap() == 0 {
		e.reply.Grow(agent.ReplyBytes)
	}
	e.reply.WriteString(sep)
	e.reply.WriteString(delta)
	// Joined, the token frames read as the stored reply does. A client
	// that did not ask for them (OLV's) and no watcher gets none: the
	// frame, boxed for emit, would be built only to be dropped.
	if e.s.takesKoeEvents() {
		e.s.send(e.ctx, protocol.Token{Type: protocol.TypeToken, Content: sep + delta})
	}
	e.pieces = e.splitter.Push(e.pieces[:0], delta)
	for _, p := range e.pieces {
		e.speaker.add(p)
	}
}

// CycleStarted tells a koe client that an LLM call began.
func (e *turnEmitter) CycleStarted(cycle int) {
	e.statusOf(cycleTask(cycle), protocol.StatusStart, "Asking "+e.model, "")
}

// CycleEnded tells how the LLM call ended; a stopped turn says nothing
// more.
func (e *turnEmitter) CycleEnded(cycle int, r agent.CycleResult) {
	e.st.cycle = r
	if e.s.playsItself {
		if err := e.s.out.Send(e.ctx, CallEnded{r}); err != nil && e.ctx.Err() == nil {
			e.s.log.Debug("message not queued", "err", err)
		}
	}
	switch {
	case r.Err == nil:
		e.statusOf(cycleTask(cycle), protocol.StatusEnd, e.model+" answered", "")
	case e.ctx.Err() == nil:
		e.statusOf(cycleTask(cycle), protocol.StatusError, e.model+" failed", Explain(r.Err).Message)
	}
}

func cycleTask(cycle int) string { return "llm:" + strconv.Itoa(cycle) }

// ToolsCalled ends a cycle that called tools: what it said is spoken now,
// whole, before the tools run, and is not part of the final answer.
func (e *turnEmitter) ToolsCalled(calls []agent.ToolCall) {
	e.flush()
	text := e.reply.String()
	cycle := histories.AfterSaid(text, e.beforeTools)
	if cycle == "" && e.filler != "" {
		e.speaker.add(sentence.Piece{Display: e.filler, Speech: e.filler})
	}
	e.beforeTools = text
	e.newCycle = true
	rec := koe.Record{Role: koe.RoleToolCall, Content: cycle, Name: e.charName}
	for _, c := range calls {
		rec.ToolCalls = append(rec.ToolCalls, koe.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	e.st.later(rec)
	e.now(messageEvent(histories.ToolCallMessage(rec, e.st.run, responseMetadata(e.st.cycle))))
}

// ToolStarted shows a call in the OLV client, and as a status to koe's.
func (e *turnEmitter) ToolStarted(c agent.ToolCall) {
	e.toolStatus(c, protocol.ToolRunning, "Input: "+c.Arguments)
	e.status(c, protocol.StatusStart, "Running "+c.Name, "")
}

// ToolFinished updates the call's entry with its result or failure.
func (e *turnEmitter) ToolFinished(c agent.ToolCall, result string, err error) {
	rec := koe.Record{Role: koe.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: agent.ToolResultText(result, err)}
	e.st.later(rec)
	if docs, ok := agent.ParseDocuments(result); ok && err == nil {
		// A search's results come after the turn's other documents, so
		// the answer's numbers most likely mean them.
		e.offer(docs)
	}
	m := histories.ToolResultMessage(rec, e.st.run)
	if err != nil {
		e.toolStatus(c, protocol.ToolError, "Error: "+err.Error())
		e.status(c, protocol.StatusError, c.Name+" failed", err.Error())
		m.Status = protocol.ToolFailed
	} else {
		e.toolStatus(c, protocol.ToolCompleted, result)
		e.status(c, protocol.StatusEnd, c.Name+" finished", "")
	}
	e.now(messageEvent(m))
}

// ToolProgress shows how far a running call is (an MCP server's progress
// reports), on the call's status entry.
func (e *turnEmitter) ToolProgress(c agent.ToolCall, text string) {
	e.status(c, protocol.StatusProgress, text, "")
}

// A turn's events follow two clocks. koe's own (tokens, status, messages)
// follow the text as the model writes it and go out at once, so that
// among themselves they are in the order things happened: an LLM call's
// start, its tokens, its end, the tool calls, their results. OLV's frames
// follow the speech: an audio piece goes out once it is synthesised, and
// OLV's tool_call_status waits its turn among the pieces, so that a
// client shows a tool after the words said before it.
//
// Once the turn is stopped its pieces are dropped, but a step that is
// still open is closed, for every audience, past the stop: no client may
// show a tool running forever.

// now sends one of koe's events of the turn.
func (e *turnEmitter) now(msg any) {
	if e.ctx.Err() != nil {
		e.s.send(context.WithoutCancel(e.s.ctx), msg)
		return
	}
	e.s.send(e.ctx, msg)
}

// inOrder sends an OLV frame where it belongs among the reply's pieces.
func (e *turnEmitter) inOrder(msg any) {
	if e.ctx.Err() != nil {
		e.s.send(context.WithoutCancel(e.s.ctx), msg)
		return
	}
	e.speaker.addMessage(msg)
}

func (e *turnEmitter) toolStatus(c agent.ToolCall, state, content string) {
	e.inOrder(protocol.ToolCallStatus{
		Type: protocol.TypeToolCallStatus, ToolID: c.ID, ToolName: c.Name, Status: state,
		Content: content, Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Name: e.charName,
	})
}

func (e *turnEmitter) status(c agent.ToolCall, state, content, details string) {
	e.statusOf("tool:"+c.ID, state, content, details)
}

// statusOf sends a koe client a step of the turn, in the reply's order.
func (e *turnEmitter) statusOf(task, state, content, details string) {
	e.now(protocol.Status{Type: protocol.TypeStatus, Content: protocol.StatusBody{
		TaskID: task, State: state, Content: content, ErrorDetails: details,
	}})
}

// Status tells a koe client of a step before the answer (routing,
// searching the knowledge base).
func (e *turnEmitter) Status(task, state, text, details string) {
	e.statusOf(task, state, text, details)
}

// Documents records what the reply may cite.
func (e *turnEmitter) Documents(docs []agent.Document) { e.offer(docs) }

func (e *turnEmitter) offer(docs []agent.Document) {
	if e.st.docs == nil {
		e.st.docs = map[int]agent.Document{}
	}
	for _, d := range docs {
		e.st.docs[d.Number] = d
	}
}

// final is the reply's text without what cycles that called tools said.
func (e *turnEmitter) final(text string) string {
	return histories.AfterSaid(text, e.beforeTools)
}

// flush hands over the unfinished tail once the stream has ended.
func (e *turnEmitter) flush() {
	e.pieces = e.splitter.Flush(e.pieces[:0])
	for _, p := range e.pieces {
		e.speaker.add(p)
	}
}
