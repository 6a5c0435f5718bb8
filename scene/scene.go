package scene

import (
	"context"
	"errors"
	"sync"
	"time"

	"koe"
	"koe/protocol"
)

// Scene is one scene: its loop (run) says the lines in order, a round
// at a time, until its rounds are said, its time is up or it is stopped.
type Scene struct {
	svc      *Service
	id       string
	plan     plan
	liveChat bool
	cast     Cast
	ctx      context.Context
	cancel   context.CancelCauseFunc
	done     chan struct{} // closed when run has returned
	wake     chan struct{} // buffered 1: the pause changed

	// mu guards what follows; it is never held across a line.
	mu        sync.Mutex
	state     string
	paused    bool
	held      bool               // koe drains for a restart: no line starts
	lineDone  chan struct{}      // closed when the line being said ends; nil between lines
	lineStop  context.CancelFunc // stops the line being said; nil between lines
	speaking  int                // index of the speaker, -1 between lines
	rounds    int
	lines     []protocol.SceneLine // the latest scenes.max_lines
	dropped   int
	waiting   []protocol.SceneLine // viewers' lines not yet heard
	answerers []chan string        // Viewers calls waiting for the line after theirs
	started   time.Time
	ran       time.Duration // running time before the current run (pauses excluded)
	runFrom   time.Time     // when it last began running; zero while paused
	endedAt   time.Time
	endReason string
	errText   string
}

func newScene(s *Service, id string, p plan) *Scene {
	ctx, cancel := context.WithCancelCause(s.base)
	now := time.Now()
	sc := &Scene{svc: s, id: id, plan: p, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1),
		state: protocol.SceneRunning, speaking: -1, started: now, runFrom: now}
	sc.lines = []protocol.SceneLine{{Kind: protocol.SceneLineTopic, Speaker: TopicSpeaker, Text: p.topic}}
	return sc
}

func (sc *Scene) isEnded() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.state == protocol.SceneEnded
}

// run is the scene's loop, in the goroutine Start made.
func (sc *Scene) run() {
	reason, err := sc.talk()
	sc.cast.Close()
	sc.cancel(nil)
	sc.mu.Lock()
	sc.state, sc.paused, sc.speaking = protocol.SceneEnded, false, -1
	sc.endedAt, sc.endReason = time.Now(), reason
	if err != nil {
		sc.errText = err.Error()
		if sc.svc.opts.Explain != nil {
			sc.errText = sc.svc.opts.Explain(err)
		}
	}
	answerers := sc.answerers
	sc.answerers = nil
	sc.mu.Unlock()
	for _, a := range answerers {
		close(a)
	}
	close(sc.done)
	sc.svc.retire(sc.id)
	log := sc.svc.log.With("scene", sc.id, "rounds", sc.info().Rounds, "reason", reason)
	if err != nil {
		log.Warn("scene ended: a line failed", "err", err)
	} else {
		log.Info("scene ended")
	}
}

// talk says the lines until the scene ends, and says why it did.
func (sc *Scene) talk() (string, error) {
	// silent counts the lines in a row that said nothing without being
	// skipped: once every character in turn has, the models have nothing
	// more to say and the scene would only run through empty rounds.
	silent := 0
	for round := 1; round <= sc.plan.maxRounds; round++ {
		for i := range sc.plan.chars {
			if err := sc.waitRunning(); err != nil {
				return sc.stopReason(), nil
			}
			if sc.plan.duration > 0 {
				left := sc.plan.duration - sc.runTime()
				if left <= 0 {
					return protocol.SceneEndDuration, nil
				}
			}
			said, err := sc.line(round, i)
			if errors.Is(err, errHeld) {
				_ = sc.waitRunning() // until Close
				return sc.stopReason(), nil
			} else if err != nil {
				if sc.ctx.Err() != nil || errors.Is(err, koe.ErrRestarting) {
					// koe drains for a restart: the character's session
					// starts no turn.
					return sc.stopReason(), nil
				}
				return protocol.SceneEndFailed, err
			}
			silent++
			if said {
				silent = 0
			}
			if silent >= len(sc.plan.chars) {
				return protocol.SceneEndSilent, nil
			}
		}
		if sc.ctx.Err() != nil {
			// The round's last line was stopped: the round is not whole.
			return sc.stopReason(), nil
		}
		sc.mu.Lock()
		sc.rounds = round
		sc.mu.Unlock()
	}
	return protocol.SceneEndRounds, nil
}

// errHeld: a line was not begun, koe drains for a restart.
var errHeld = errors.New("koe drains for a restart")

// stopReason is why the scene's context ended.
func (sc *Scene) stopReason() string {
	if sc.ctx.Err() != nil && errors.Is(context.Cause(sc.ctx), errStopped) {
		return protocol.SceneEndStopped
	}
	return protocol.SceneEndShutdown
}

// runTime is how long the scene has run, pauses excluded.
func (sc *Scene) runTime() time.Duration {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	t := sc.ran
	if !sc.runFrom.IsZero() {
		t += time.Since(sc.runFrom)
	}
	return t
}

// waitRunning returns once the scene is not paused, or with the scene's
// end.
func (sc *Scene) waitRunning() error {
	for {
		sc.mu.Lock()
		paused := sc.paused
		if paused {
			sc.state = protocol.ScenePaused
		}
		paused = paused || sc.held
		sc.mu.Unlock()
		if err := sc.ctx.Err(); err != nil {
			return err
		}
		if !paused {
			return nil
		}
		select {
		case <-sc.wake:
		case <-sc.ctx.Done():
			return sc.ctx.Err()
		}
	}
}

// line has character i say its line of round; viewers' lines that came
// since the last line are heard first. said: the line said something, or
// was skipped (the streamer's doing, not the models' silence).
func (sc *Scene) line(round, i int) (said bool, err error) {
	lineCtx, stop := context.WithCancel(sc.ctx)
	defer stop()
	sc.mu.Lock()
	if sc.held {
		// Held since waitRunning let this line go: it does not begin.
		sc.mu.Unlock()
		return false, errHeld
	}
	sc.state = protocol.SceneRunning
	waiting := sc.waiting
	sc.waiting = nil
	for _, v := range waiting {
		v.Round = round
		sc.appendLocked(v)
	}
	sc.speaking, sc.lineStop = i, stop
	done := make(chan struct{})
	sc.lineDone = done
	defer close(done)
	answerers := sc.answerers
	sc.answerers = nil
	sc.mu.Unlock()

	for _, v := range waiting {
		if err := sc.cast.Hear(lineCtx, v); err != nil {
			sc.svc.log.Warn("scene: viewers' line not kept in the scene's record", "scene", sc.id, "err", err)
		}
	}
	text, interrupted, err := sc.cast.Speak(lineCtx, i)
	said = text != "" || interrupted

	c := sc.plan.chars[i]
	sc.mu.Lock()
	sc.speaking, sc.lineStop, sc.lineDone = -1, nil, nil
	if text != "" || interrupted {
		sc.appendLocked(protocol.SceneLine{Kind: protocol.SceneLineCharacter, Speaker: c.Name, ConfUID: c.ConfUID, Text: text, Round: round, Interrupted: interrupted})
	}
	sc.mu.Unlock()
	for _, a := range answerers {
		a <- text
		close(a)
	}
	if err != nil && lineCtx.Err() != nil && sc.ctx.Err() == nil {
		// A skipped line is no failure: the scene goes on.
		return said, nil
	}
	return said, err
}

// appendLocked keeps a line, dropping the oldest past scenes.max_lines.
func (sc *Scene) appendLocked(l protocol.SceneLine) {
	sc.lines = append(sc.lines, l)
	if over := len(sc.lines) - sc.svc.cfg.MaxLines; over > 0 {
		sc.lines = append(sc.lines[:0], sc.lines[over:]...)
		sc.dropped += over
	}
}

// hear takes viewers' lines for the next speaker, and returns where the
// next line's text will be sent; false once the scene has ended.
func (sc *Scene) hear(text string, viewers []string) (<-chan string, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.state == protocol.SceneEnded {
		return nil, false
	}
	sc.waiting = append(sc.waiting, protocol.SceneLine{Kind: protocol.SceneLineViewers, Speaker: ViewersSpeaker(viewers), Text: text})
	ch := make(chan string, 1)
	sc.answerers = append(sc.answerers, ch)
	return ch, true
}

// TopicSpeaker names the scene's opening line, its topic, in the
// transcript the characters are given.
const TopicSpeaker = "Streamer"

// ViewersSpeaker names a line of viewers' messages in the transcript
// ("viewers alice, bob"); the messages inside name each viewer again.
func ViewersSpeaker(viewers []string) string {
	s := "viewers"
	for i, v := range viewers {
		if i == 0 {
			s += " "
		} else {
			s += ", "
		}
		s += v
	}
	return s
}

// setPaused pauses or resumes; an ended scene refuses both.
func (sc *Scene) setPaused(paused bool) error {
	sc.mu.Lock()
	if sc.state == protocol.SceneEnded {
		sc.mu.Unlock()
		return koe.Errorf(koe.Conflict, "scene %s has ended (%s)", sc.id, sc.endReason)
	}
	if sc.paused != paused {
		sc.paused = paused
		now := time.Now()
		if paused {
			sc.ran += now.Sub(sc.runFrom)
			sc.runFrom = time.Time{}
			if sc.speaking < 0 {
				sc.state = protocol.ScenePaused
			}
		} else {
			sc.runFrom = now
			sc.state = protocol.SceneRunning
		}
	}
	sc.mu.Unlock()
	select {
	case sc.wake <- struct{}{}:
	default:
	}
	return nil
}

// hold starts no line from now on (koe drains for a restart), and
// returns the end of the line being said (nil if none).
func (sc *Scene) hold() <-chan struct{} {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.held = true
	if sc.lineDone == nil {
		return nil
	}
	return sc.lineDone
}

// skip stops the line being said.
func (sc *Scene) skip() bool {
	sc.mu.Lock()
	stop := sc.lineStop
	sc.mu.Unlock()
	if stop == nil {
		return false
	}
	stop()
	return true
}

// info is the scene's state for the API.
func (sc *Scene) info() protocol.SceneInfo {
	sc.mu.Lock()
	cast := sc.cast
	sc.mu.Unlock()
	record := ""
	if cast != nil {
		record = cast.RecordUID()
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	in := protocol.SceneInfo{RecordUID: record, ID: sc.id, State: sc.state, Topic: sc.plan.topic, Characters: append([]protocol.SceneCharacter(nil), sc.plan.chars...),
		MaxRounds: sc.plan.maxRounds, Rounds: sc.rounds, LiveChat: sc.liveChat, Lines: append([]protocol.SceneLine{}, sc.lines...),
		LinesDropped: sc.dropped, StartedAt: sc.started, EndReason: sc.endReason, Error: sc.errText}
	if sc.plan.duration > 0 {
		in.Duration = sc.plan.duration.String()
	}
	if sc.speaking >= 0 {
		in.Speaking = sc.plan.chars[sc.speaking].ConfUID
	}
	if !sc.endedAt.IsZero() {
		t := sc.endedAt
		in.EndedAt = &t
	}
	return in
}
