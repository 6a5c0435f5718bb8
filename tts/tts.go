// Package tts turns text into speech: engines behind one small interface
// (the local espeak-ng binary, or any server with OpenAI's
// /v1/audio/speech), and the audio helpers koe needs around them: turning
// whatever WAV an engine produced into one canonical form, and the volume
// envelope clients use for lip sync.
//
// Every engine answers with the same Audio (16-bit mono PCM WAV), so the
// rest of koe never cares which engine spoke.
package tts

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"koe/internal/timeout"
)

// Engine turns text into speech. Implementations stop promptly when ctx
// ends (killing subprocesses, aborting HTTP requests) and then return an
// error wrapping ctx's error.
type Engine interface {
	Synthesize(ctx context.Context, text string) (Audio, error)
}

// maxAudioBytes bounds what koe reads from an engine, so a runaway engine
// or server cannot exhaust memory. 50 MB is over ten minutes of 24 kHz
// speech, far more than one sentence.
const maxAudioBytes = 50 << 20

// errEmptyText is returned for text with nothing to say. Callers are meant
// to skip such pieces rather than synthesise silence.
var errEmptyText = errors.New("tts: no text to speak")

// New builds the configured engine. httpClient is shared with the rest of
// koe (its connection pool); nil means a plain http.Client. Each Synthesize
// is bounded by cfg.Timeout when it is positive. For EngineNone it returns
// a nil Engine and no error: speech is off by choice.
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
	case EngineEspeak:
		e, err = newEspeak(cfg.Espeak)
	case EngineOpenAI:
		e = newOpenAI(cfg.OpenAI, httpClient)
	}
	if err != nil {
		return nil, err
	}
	slog.Debug("tts engine ready", "engine", cfg.Engine, "timeout", cfg.Timeout)
	if cfg.Timeout > 0 {
		e = timeoutEngine{next: e, limit: cfg.Timeout}
	}
	return e, nil
}

// timeoutEngine bounds every synthesis, so one stuck sentence (a hung
// server, an engine that never ends) cannot hold up a whole reply.
type timeoutEngine struct {
	next  Engine
	limit time.Duration
}

func (t timeoutEngine) Synthesize(ctx context.Context, text string) (Audio, error) {
	return timeout.Run(ctx, t.limit, "tts.timeout", "speech synthesis", func(ctx context.Context) (Audio, error) {
		return t.next.Synthesize(ctx, text)
	})
}
