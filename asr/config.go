package asr

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
	EnginePocketsphinx = "pocketsphinx"
	EngineOpenAI       = "openai"
	// EngineNone turns speech input off: audio from clients is refused
	// with a clear message instead of being transcribed.
	EngineNone = "none"
)

// pocketsphinxModelDir is where Debian's pocketsphinx-en-us package puts
// the US English model.
const pocketsphinxModelDir = "/usr/share/pocketsphinx/model/en-us"

// Config chooses and tunes the speech recogniser.
type Config struct {
	Engine string `yaml:"engine"` // "pocketsphinx" (default), "openai" or "none"
	// Timeout bounds each utterance's transcription (0 = none). A user
	// waiting longer than this for their words to register is better told
	// that something is wrong.
	Timeout      time.Duration      `yaml:"timeout"`
	Pocketsphinx PocketsphinxConfig `yaml:"pocketsphinx"`
	OpenAI       OpenAIConfig       `yaml:"openai"`
}

// PocketsphinxConfig runs the local pocketsphinx_continuous binary (Debian
// packages pocketsphinx and pocketsphinx-en-us). It is weaker than Whisper
// but needs no service and no GPU.
type PocketsphinxConfig struct {
	// Binary is a name looked up in PATH or a path. It is resolved when the
	// engine is built, so a missing binary fails at start-up.
	Binary string `yaml:"binary"`
	HMM    string `yaml:"hmm"`  // acoustic model directory (-hmm)
	Dict   string `yaml:"dict"` // pronunciation dictionary (-dict)
	LM     string `yaml:"lm"`   // language model (-lm)
}

// OpenAIConfig talks to any server exposing OpenAI's POST
// /v1/audio/transcriptions: the self-hosted Whisper servers (the default
// points at one on port 8000), or OpenAI itself with its own /v1 base URL
// and an API key.
type OpenAIConfig struct {
	BaseURL string `yaml:"base_url"` // ends in /v1
	APIKey  string `yaml:"api_key"`
	Model   string `yaml:"model"`
	// Language is an optional ISO-639-1 hint (en, de, ja…). Whisper
	// guesses the language otherwise, and short utterances fool it.
	Language string `yaml:"language"`
	// Prompt is optional text in the style of what is said: names and
	// words the recogniser should expect.
	Prompt string `yaml:"prompt"`
	// What koe reads of the server's answers, so that a broken or hostile
	// server cannot take koe's memory: MaxResponseBytes bounds a
	// transcript's answer (0: DefaultMaxTranscriptBytes); MaxErrorBytes
	// is how much of an error answer is read (0:
	// openaicompat.DefaultMaxErrorBytes), the rest cut off, marked "…".
	MaxResponseBytes int `yaml:"max_response_bytes"`
	MaxErrorBytes    int `yaml:"max_error_bytes"`
}

// DefaultMaxTranscriptBytes bounds a transcript's answer unless
// asr.openai.max_response_bytes says otherwise (a minute of speech is about
// a kilobyte of text); MinMaxTranscriptBytes is the least it may be.
const (
	DefaultMaxTranscriptBytes = 1 << 20
	MinMaxTranscriptBytes     = 4 << 10
)

// DefaultConfig returns the documented defaults: pocketsphinx, which works
// offline with nothing but two Debian packages.
func DefaultConfig() Config {
	return Config{
		Engine:  EnginePocketsphinx,
		Timeout: 30 * time.Second,
		Pocketsphinx: PocketsphinxConfig{
			Binary: "pocketsphinx_continuous",
			HMM:    pocketsphinxModelDir + "/en-us",
			Dict:   pocketsphinxModelDir + "/cmudict-en-us.dict",
			LM:     pocketsphinxModelDir + "/en-us.lm.bin",
		},
		OpenAI: OpenAIConfig{
			BaseURL: "http://127.0.0.1:8000/v1",
			Model:   "whisper-1",

			MaxResponseBytes: DefaultMaxTranscriptBytes,
			MaxErrorBytes:    openaicompat.DefaultMaxErrorBytes,
		},
	}
}

// Validate reports settings that can never work. Only the selected engine's
// section is checked: a setup using pocketsphinx should not fail to load
// because of an openai section it never uses. Whether files exist is
// checked by New, not here.
func (c Config) Validate() error {
	if c.Timeout < 0 {
		return fmt.Errorf("asr.timeout %s is negative (0 means no limit)", c.Timeout)
	}
	switch c.Engine {
	case EnginePocketsphinx:
		return c.Pocketsphinx.validate()
	case EngineOpenAI:
		return c.OpenAI.validate()
	case EngineNone:
		return nil
	}
	return fmt.Errorf("asr.engine %q is unknown: use %s, %s or %s", c.Engine, EnginePocketsphinx, EngineOpenAI, EngineNone)
}

func (c PocketsphinxConfig) validate() error {
	if c.Binary == "" {
		return errors.New("asr.pocketsphinx.binary is empty: set it to pocketsphinx_continuous (Debian package pocketsphinx) or a path to the binary")
	}
	for _, f := range []struct{ key, value, example string }{
		{"hmm", c.HMM, pocketsphinxModelDir + "/en-us"},
		{"dict", c.Dict, pocketsphinxModelDir + "/cmudict-en-us.dict"},
		{"lm", c.LM, pocketsphinxModelDir + "/en-us.lm.bin"},
	} {
		if f.value == "" {
			return fmt.Errorf("asr.pocketsphinx.%s is empty (Debian package pocketsphinx-en-us installs %s)", f.key, f.example)
		}
	}
	return nil
}

func (c OpenAIConfig) validate() error {
	if err := modelhttp.CheckSetting("asr.openai.max_response_bytes", c.MaxResponseBytes, MinMaxTranscriptBytes, DefaultMaxTranscriptBytes); err != nil {
		return err
	}
	if err := modelhttp.CheckSetting("asr.openai.max_error_bytes", c.MaxErrorBytes, openaicompat.MinMaxErrorBytes, openaicompat.DefaultMaxErrorBytes); err != nil {
		return err
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("asr.openai.base_url %q is not an http(s) URL (example: http://127.0.0.1:8000/v1)", c.BaseURL)
	}
	if c.Model == "" {
		return errors.New("asr.openai.model is empty (example: whisper-1)")
	}
	if c.Language != "" && !isLanguageCode(c.Language) {
		return fmt.Errorf("asr.openai.language %q is not an ISO-639-1 code: use two lowercase letters such as en, de or ja, or leave it empty to let the server detect the language", c.Language)
	}
	return nil
}

// isLanguageCode accepts the shape of an ISO-639-1 code; the server knows
// which codes it supports.
func isLanguageCode(s string) bool {
	return len(s) == 2 && s[0] >= 'a' && s[0] <= 'z' && s[1] >= 'a' && s[1] <= 'z'
}
