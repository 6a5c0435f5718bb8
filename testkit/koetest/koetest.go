// Package koetest starts a real koe for end-to-end tests: the same wiring
// as main (app.Main), on a free loopback port, with a fake OpenAI-compatible
// LLM and its data in the test's temporary directories.
package koetest

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/app"
	"koe/config"
	"koe/testkit/fakellm"
)

// Logger routes koe's logs to the test log (shown with -v or on failure).
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// StartLLM starts a fake OpenAI-compatible server, closed at cleanup.
func StartLLM(t testing.TB, respond func(fakellm.Request) fakellm.Reply) *fakellm.Server {
	t.Helper()
	llm, err := fakellm.Start("127.0.0.1:0", respond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llm.Close() })
	return llm
}

// Config is koe's default configuration pointed at llmURL, listening on a
// free loopback port, with its data in dataDir.
func Config(t testing.TB, dataDir, llmURL string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dataDir
	cfg.CharactersDir = filepath.Join(t.TempDir(), "characters")
	cfg.Server.Port = 0
	cfg.Server.BackgroundsDir = filepath.Join(t.TempDir(), "bg")
	cfg.Character.LLM.BaseURL = llmURL
	cfg.Character.LLM.Model = fakellm.ModelID
	cfg.Character.LLM.IdleTimeout = 5 * time.Second
	cfg.Conversation.PlaybackTimeout = 2 * time.Second
	// One audio frame per sentence, as the suite's traces record them:
	// sentences streamed in parts (tts.stream_first_ms) have tests of
	// their own, which turn it on.
	cfg.Character.TTS.StreamFirstMillis = 0
	if testing.Short() {
		// The short lane runs no program from outside koe: the
		// character speaks through the fake server's speech endpoint
		// instead of espeak-ng, the default.
		cfg = fakeSpeech(cfg, llmURL)
	}
	return cfg
}

// WithFakeSpeech makes the character speak through the OpenAI-compatible
// engine against the fake server's deterministic speech endpoint (a tone,
// fakellm.SpeechDuration long).
func WithFakeSpeech(cfg config.Config, llm *fakellm.Server) config.Config {
	return fakeSpeech(cfg, llm.URL())
}

func fakeSpeech(cfg config.Config, llmURL string) config.Config {
	cfg.Character.TTS.Engine = "openai"
	cfg.Character.TTS.OpenAI.BaseURL = llmURL
	return cfg
}

// StartKoe runs koe as main does, minus flags and signals; it is closed at
// cleanup (closing it earlier is fine).
func StartKoe(t testing.TB, cfg config.Config) *app.Main {
	t.Helper()
	m := &app.Main{Config: cfg, Logger: Logger(t), Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}
