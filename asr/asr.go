package asr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Engine turns a recorded utterance into text.
type Engine interface {
	// Transcribe takes a complete 16 kHz 16-bit mono PCM WAV file and
	// returns the text, trimmed; "" when nothing was recognised. It stops
	// promptly when ctx ends (the subprocess group is killed, the HTTP
	// request aborted) and then returns an error wrapping ctx's error.
	Transcribe(ctx context.Context, wav []byte) (string, error)
}

// ErrNoAudio is returned for an empty input: there is no file to send.
// Callers are meant to skip such utterances rather than transcribe them.
var ErrNoAudio = errors.New("asr: no audio to transcribe")

// New builds the configured engine. httpClient is shared with the rest of
// koe (its connection pool); nil means a plain http.Client. Each Transcribe
// is bounded by cfg.Timeout when it is positive. For EngineNone it returns
// a nil Engine and no error: speech input is off by choice.
//
// The local engine is checked here (binary on PATH, model files present),
// so a missing package fails at start-up, not at the first utterance.
func New(cfg Config, httpClient *http.Client) (Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var (
		e   Engine
		err error
	)
	switch cfg.Engine {
	case EngineNone:
		return nil, nil
	case EnginePocketsphinx:
		e, err = newPocketsphinx(cfg.Pocketsphinx)
	case EngineOpenAI:
		e = newOpenAI(cfg.OpenAI, httpClient)
	}
	if err != nil {
		return nil, err
	}
	slog.Debug("asr engine ready", "engine", cfg.Engine, "timeout", cfg.Timeout)
	if cfg.Timeout > 0 {
		e = timeoutEngine{next: e, limit: cfg.Timeout}
	}
	return e, nil
}

// errTranscriptionTimeout is the cause timeoutEngine gives its deadline, so
// it can tell its own deadline from one the caller set.
var errTranscriptionTimeout = errors.New("asr.timeout reached")

// timeoutEngine bounds every transcription, so one stuck utterance (a hung
// server, a recogniser that never ends) cannot hold a session forever.
type timeoutEngine struct {
	next  Engine
	limit time.Duration
}

func (t timeoutEngine) Transcribe(ctx context.Context, wav []byte) (string, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, t.limit, errTranscriptionTimeout)
	defer cancel()
	text, err := t.next.Transcribe(ctx, wav)
	if err != nil && errors.Is(context.Cause(ctx), errTranscriptionTimeout) {
		// Callers test for the deadline with errors.Is; make sure it is
		// there even if an engine reported the abort in its own words.
		if !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return "", fmt.Errorf("speech recognition took longer than asr.timeout (%s): %w", t.limit, err)
	}
	return text, err
}
