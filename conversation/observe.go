package conversation

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
)

// Observer is told what an operator counts: turns and how they end, how
// long the first token and the first audio took, failures of the services
// koe calls. app fills it with koe's metrics; nil counts nothing. Its
// methods are called on turns' paths and must be quick and never block.
type Observer interface {
	TurnStarted()
	// TurnEnded gets one of the Turn* outcomes, once per started turn.
	TurnEnded(outcome string)
	FirstToken(time.Duration)
	FirstAudio(time.Duration)
	// DependencyFailed reports a failure of service (ServiceLLM,
	// ServiceTTS, ServiceASR).
	DependencyFailed(service string, err error)
	// SessionOpened counts a session of kind as open until closed is
	// called; conversation opens the "live" ones itself.
	SessionOpened(kind string) (closed func())
}

// How a turn ends, as Observer.TurnEnded is told.
const (
	TurnCompleted = "completed"
	// TurnUnsaved: the reply was sent whole, but a record of the turn
	// (the user's message, a tool step, the reply) could not be stored.
	TurnUnsaved     = "unsaved"
	TurnInterrupted = "interrupted"
	TurnStopped     = "stopped"
	TurnFailed      = "failed"
)

// The services whose failures Observer.DependencyFailed is told.
const (
	ServiceLLM = "llm"
	ServiceTTS = "tts"
	ServiceASR = "asr"
)

type noObserver struct{}

func (noObserver) TurnStarted()                         {}
func (noObserver) TurnEnded(string)                     {}
func (noObserver) FirstToken(time.Duration)             {}
func (noObserver) FirstAudio(time.Duration)             {}
func (noObserver) DependencyFailed(string, error)       {}
func (noObserver) SessionOpened(string) (closed func()) { return func() {} }

// turnWatch measures one turn for the Observer. began is when the turn's
// input reached koe. The first token is seen by the turn's goroutine, the
// first audio by its speaker's sender; end is called by the turn's
// goroutine only.
type turnWatch struct {
	obs   Observer
	began time.Time
	token atomic.Bool
	audio atomic.Bool
	ended bool
}

func newTurnWatch(obs Observer) *turnWatch {
	obs.TurnStarted()
	return &turnWatch{obs: obs, began: time.Now()}
}

func (w *turnWatch) firstToken() {
	if !w.token.Swap(true) {
		w.obs.FirstToken(time.Since(w.began))
	}
}

func (w *turnWatch) firstAudio() {
	if !w.audio.Swap(true) {
		w.obs.FirstAudio(time.Since(w.began))
	}
}

// end reports the turn's outcome; only the first call counts. The turn
// calls it before its last frame goes out, so that a client that saw the
// turn end finds it counted.
func (w *turnWatch) end(outcome string) {
	if w.ended {
		return
	}
	w.ended = true
	w.obs.TurnEnded(outcome)
}

// endStopped reports a turn that ended without saying how: its context
// was cancelled (by its own client, or from outside), or its client went
// away before the turn could end.
func (w *turnWatch) endStopped(ctx context.Context) {
	cause := context.Cause(ctx)
	var ic interruptCause
	var bc *bargeInCause
	if errors.As(cause, &ic) || errors.As(cause, &bc) || errors.Is(cause, errSuperseded) {
		w.end(TurnInterrupted)
		return
	}
	w.end(TurnStopped)
}

// turnLogs adds the running turn's history_uid and turn_id to every line
// a session logs, the agent's included: the session's logger is built on
// it once, and the turn sets and clears the attributes.
type turnLogs struct {
	slog.Handler
	cur *atomic.Pointer[[]slog.Attr]
}

func (h turnLogs) Handle(ctx context.Context, r slog.Record) error {
	if attrs := h.cur.Load(); attrs != nil {
		r = r.Clone()
		r.AddAttrs(*attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

func (h turnLogs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return turnLogs{h.Handler.WithAttrs(attrs), h.cur}
}

func (h turnLogs) WithGroup(name string) slog.Handler {
	return turnLogs{h.Handler.WithGroup(name), h.cur}
}

// setTurnLog labels the session's log lines with a turn (nil: none).
func (s *Session) setTurnLog(attrs ...slog.Attr) {
	if len(attrs) == 0 {
		s.turnAttrs.Store(nil)
		return
	}
	s.turnAttrs.Store(&attrs)
}
