package asr

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"koe/internal/timeout"
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

// timeoutEngine bounds every transcription, so one stuck utterance (a hung
// server, a recogniser that never ends) cannot hold a session forever.
type timeoutEngine struct {
	next  Engine
	limit time.Duration
}

func (t timeoutEngine) Transcribe(ctx context.Context, wav []byte) (string, error) {
	return timeout.Run(ctx, t.limit, "asr.timeout", "speech recognition", func(ctx context.Context) (string, error) {
		return t.next.Transcribe(ctx, wav)
	})
}
