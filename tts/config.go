package tts

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"koe/internal/modelhttp"
	"koe/internal/openaicompat"
)

// Engine names for Config.Engine.
const (
	EngineEspeak = "espeak-ng"
	EngineOpenAI = "openai"
	// EngineNone turns speech off: replies come as text-only pieces.
	EngineNone = "none"
)

// Config chooses and tunes one character's speech engine.
type Config struct {
	Engine string `yaml:"engine"` // "espeak-ng" (default) or "openai"
	// Timeout bounds each synthesis (0 = none). A sentence that takes
	// longer is better sent as text than left blocking the reply.
	Timeout time.Duration `yaml:"timeout"`
	Espeak  EspeakConfig  `yaml:"espeak_ng"`
	OpenAI  OpenAIConfig  `yaml:"openai"`
	// StreamFirstMillis: a sentence's first audio goes out as soon as the
	// engine has produced this much of it, rather than once the whole
	// sentence is synthesised (0: wait for the whole sentence). Enough for
	// a smooth start: the rest has to be ready before it has played.
	StreamFirstMillis int `yaml:"stream_first_ms"`
	// StreamPieceMillis is the most audio one later piece of a streamed
	// sentence holds. Pieces grow from stream_first_ms up to it (each at
	// most what was sent before it), so that an engine a little faster
	// than real time stays ahead of playback; each piece is one more join
	// for the client to play across.
	StreamPieceMillis int `yaml:"stream_piece_ms"`
}

// Limits of the streaming settings: below 20 ms (one lip-sync slice) a
// piece holds nothing worth a frame; above a minute streaming means
// nothing.
const (
	minStreamMillis = 20
	maxStreamMillis = 60000
)

// EspeakConfig runs the local espeak-ng binary (Debian package espeak-ng).
type EspeakConfig struct {
	// Binary is a name looked up in PATH or a path. It is resolved when the
	// engine is built, so a missing binary fails at start-up, not at the
	// first sentence.
	Binary string `yaml:"binary"`
	Voice  string `yaml:"voice"` // -v, e.g. en-us, en-gb+f3, de; espeak-ng --voices lists them
	Rate   int    `yaml:"rate"`  // -s, words per minute, 80..450
	Pitch  int    `yaml:"pitch"` // -p, 0..99
}

// OpenAIConfig talks to any server exposing OpenAI's POST /v1/audio/speech:
// local OpenAI-compatible TTS servers (the default points at one on port
// 8880), or OpenAI itself with its own /v1 base URL and an API key.
type OpenAIConfig struct {
	BaseURL string  `yaml:"base_url"` // ends in /v1
	APIKey  string  `yaml:"api_key"`
	Model   string  `yaml:"model"`
	Voice   string  `yaml:"voice"`
	Speed   float64 `yaml:"speed"` // 0.25..4.0
	// Format is "wav" or "pcm" (24 kHz s16le mono). Compressed formats are
	// refused: koe sends WAV to clients and computes lip-sync volumes from
	// the samples, and decoding mp3/opus/aac/flac would need codecs koe
	// does not carry.
	Format string `yaml:"format"`
	// MaxErrorBytes is how much of an error answer koe reads (0:
	// openaicompat.DefaultMaxErrorBytes); the rest is cut off, marked "…",
	// so that a broken or hostile server's error page cannot take koe's
	// memory. The audio itself is bounded by the most one sentence may
	// need.
	MaxErrorBytes int `yaml:"max_error_bytes"`
}

// DefaultConfig returns the documented defaults: espeak-ng, which works
// offline with nothing but a Debian package.
func DefaultConfig() Config {
	return Config{
		Engine:  EngineEspeak,
		Timeout: 15 * time.Second,

		StreamFirstMillis: 250,
		StreamPieceMillis: 1000,
		Espeak: EspeakConfig{
			Binary: "espeak-ng",
			Voice:  "en-us",
			Rate:   175,
			Pitch:  50,
		},
		OpenAI: OpenAIConfig{
			BaseURL: "http://127.0.0.1:8880/v1",
			Model:   "tts-1",
			Voice:   "alloy",
			Speed:   1.0,
			Format:  "wav",

			MaxErrorBytes: openaicompat.DefaultMaxErrorBytes,
		},
	}
}

// Validate reports settings that can never work. Only the selected engine's
// section is checked: a character using espeak-ng should not fail to load
// because of an openai section it never uses.
func (c Config) Validate() error {
	if c.Timeout < 0 {
		return fmt.Errorf("tts.timeout %s is negative (0 means no limit)", c.Timeout)
	}
	if err := c.validateStream(); err != nil {
		return err
	}
	switch c.Engine {
	case EngineEspeak:
		return c.Espeak.validate()
	case EngineOpenAI:
		return c.OpenAI.validate()
	case EngineNone:
		return nil
	}
	return fmt.Errorf("tts.engine %q is unknown: use %s, %s or %s", c.Engine, EngineEspeak, EngineOpenAI, EngineNone)
}

func (c EspeakConfig) validate() error {
	if c.Binary == "" {
		return errors.New("tts.espeak_ng.binary is empty: set it to espeak-ng (Debian package espeak-ng) or a path to the binary")
	}
	if !validVoice(c.Voice) {
		return fmt.Errorf("tts.espeak_ng.voice %q is not a voice name: use letters, digits and _ + - / only, not starting with - (e.g. en-us, en-gb+f3)", c.Voice)
	}
	if c.Rate < 80 || c.Rate > 450 {
		return fmt.Errorf("tts.espeak_ng.rate %d is out of range: use 80..450 words per minute", c.Rate)
	}
	if c.Pitch < 0 || c.Pitch > 99 {
		return fmt.Errorf("tts.espeak_ng.pitch %d is out of range: use 0..99", c.Pitch)
	}
	return nil
}

// validVoice keeps the voice a plain name: it becomes a command-line
// argument, so nothing that a shell or espeak-ng's option parser could read
// as something else may get through.
func validVoice(v string) bool {
	if v == "" || v[0] == '-' || len(v) > 64 {
		return false
	}
	for _, r := range v {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '_', r == '+', r == '-', r == '/':
		default:
			return false
		}
	}
	return true
}

func (c OpenAIConfig) validate() error {
	if err := modelhttp.CheckSetting("tts.openai.max_error_bytes", c.MaxErrorBytes, openaicompat.MinMaxErrorBytes, openaicompat.DefaultMaxErrorBytes); err != nil {
		return err
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("tts.openai.base_url %q is not an http(s) URL (example: http://127.0.0.1:8880/v1)", c.BaseURL)
	}
	if c.Model == "" {
		return errors.New("tts.openai.model is empty (example: tts-1)")
	}
	if c.Voice == "" {
		return errors.New("tts.openai.voice is empty (example: alloy)")
	}
	// The negated form also rejects NaN.
	if !(c.Speed >= 0.25 && c.Speed <= 4.0) {
		return fmt.Errorf("tts.openai.speed %g is out of range: use 0.25..4.0", c.Speed)
	}
	switch c.Format {
	case "wav", "pcm":
		return nil
	case "mp3", "opus", "aac", "flac":
		return fmt.Errorf("tts.openai.format %q is compressed, but koe needs uncompressed audio: use wav or pcm", c.Format)
	}
	return fmt.Errorf("tts.openai.format %q is unknown: use wav or pcm", c.Format)
}

func (c Config) validateStream() error {
	if c.StreamFirstMillis == 0 {
		return nil // streaming is off; stream_piece_ms is not used
	}
	if c.StreamFirstMillis < minStreamMillis || c.StreamFirstMillis > maxStreamMillis {
		return fmt.Errorf("tts.stream_first_ms %d is out of range: use %d..%d milliseconds of audio, or 0 to send whole sentences", c.StreamFirstMillis, minStreamMillis, maxStreamMillis)
	}
	if c.StreamPieceMillis < c.StreamFirstMillis || c.StreamPieceMillis > maxStreamMillis {
		return fmt.Errorf("tts.stream_piece_ms %d is out of range: use tts.stream_first_ms (%d) up to %d milliseconds of audio", c.StreamPieceMillis, c.StreamFirstMillis, maxStreamMillis)
	}
	return nil
}
