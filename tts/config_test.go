package tts

import (
	"math"
	"strings"
	"testing"
	"time"

	"koe/testkit/fakellm/fakellmtest"
)

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if cfg.Engine != EngineEspeak || cfg.Timeout != 15*time.Second {
		t.Errorf("defaults: %+v", cfg)
	}
	want := EspeakConfig{Binary: "espeak-ng", Voice: "en-us", Rate: 175, Pitch: 50}
	if cfg.Espeak != want {
		t.Errorf("espeak defaults %+v, want %+v", cfg.Espeak, want)
	}
	o := cfg.OpenAI
	if o.BaseURL != "http://127.0.0.1:8880/v1" || o.Model != "tts-1" || o.Voice != "alloy" || o.Speed != 1.0 || o.Format != "wav" || o.APIKey != "" {
		t.Errorf("openai defaults %+v", o)
	}
	cfg.Engine = EngineOpenAI
	if err := cfg.Validate(); err != nil {
		t.Errorf("openai defaults do not validate: %v", err)
	}
	cfg.Timeout = 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("timeout 0 (no limit): %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	espeak := func(f func(*EspeakConfig)) Config {
		c := DefaultConfig()
		f(&c.Espeak)
		return c
	}
	openai := func(f func(*OpenAIConfig)) Config {
		c := DefaultConfig()
		c.Engine = EngineOpenAI
		f(&c.OpenAI)
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // the key the error must name
	}{
		{"unknown engine", func() Config { c := DefaultConfig(); c.Engine = "festival"; return c }(), "tts.engine"},
		{"empty engine", func() Config { c := DefaultConfig(); c.Engine = ""; return c }(), "tts.engine"},
		{"negative timeout", func() Config { c := DefaultConfig(); c.Timeout = -time.Second; return c }(), "tts.timeout"},
		{"empty binary", espeak(func(e *EspeakConfig) { e.Binary = "" }), "tts.espeak_ng.binary"},
		{"empty voice", espeak(func(e *EspeakConfig) { e.Voice = "" }), "tts.espeak_ng.voice"},
		{"voice with space", espeak(func(e *EspeakConfig) { e.Voice = "en us" }), "tts.espeak_ng.voice"},
		{"voice with semicolon", espeak(func(e *EspeakConfig) { e.Voice = "en;rm -rf" }), "tts.espeak_ng.voice"},
		{"voice with dots", espeak(func(e *EspeakConfig) { e.Voice = "../../etc/passwd" }), "tts.espeak_ng.voice"},
		{"voice like an option", espeak(func(e *EspeakConfig) { e.Voice = "--stdin" }), "tts.espeak_ng.voice"},
		{"voice with unicode", espeak(func(e *EspeakConfig) { e.Voice = "énglish" }), "tts.espeak_ng.voice"},
		{"rate too low", espeak(func(e *EspeakConfig) { e.Rate = 79 }), "tts.espeak_ng.rate"},
		{"rate too high", espeak(func(e *EspeakConfig) { e.Rate = 451 }), "tts.espeak_ng.rate"},
		{"pitch negative", espeak(func(e *EspeakConfig) { e.Pitch = -1 }), "tts.espeak_ng.pitch"},
		{"pitch too high", espeak(func(e *EspeakConfig) { e.Pitch = 100 }), "tts.espeak_ng.pitch"},
		{"base url empty", openai(func(o *OpenAIConfig) { o.BaseURL = "" }), "tts.openai.base_url"},
		{"base url no scheme", openai(func(o *OpenAIConfig) { o.BaseURL = "127.0.0.1:8880/v1" }), "tts.openai.base_url"},
		{"base url ftp", openai(func(o *OpenAIConfig) { o.BaseURL = "ftp://host/v1" }), "tts.openai.base_url"},
		{"empty model", openai(func(o *OpenAIConfig) { o.Model = "" }), "tts.openai.model"},
		{"empty voice", openai(func(o *OpenAIConfig) { o.Voice = "" }), "tts.openai.voice"},
		{"speed too low", openai(func(o *OpenAIConfig) { o.Speed = 0.2 }), "tts.openai.speed"},
		{"speed zero", openai(func(o *OpenAIConfig) { o.Speed = 0 }), "tts.openai.speed"},
		{"speed too high", openai(func(o *OpenAIConfig) { o.Speed = 4.5 }), "tts.openai.speed"},
		{"speed NaN", openai(func(o *OpenAIConfig) { o.Speed = math.NaN() }), "tts.openai.speed"},
		{"mp3", openai(func(o *OpenAIConfig) { o.Format = "mp3" }), "uncompressed"},
		{"opus", openai(func(o *OpenAIConfig) { o.Format = "opus" }), "uncompressed"},
		{"flac", openai(func(o *OpenAIConfig) { o.Format = "flac" }), "tts.openai.format"},
		{"unknown format", openai(func(o *OpenAIConfig) { o.Format = "ogg" }), "tts.openai.format"},
		{"empty format", openai(func(o *OpenAIConfig) { o.Format = "" }), "tts.openai.format"},
	} {
		err := tc.cfg.Validate()
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not name %q", tc.name, err, tc.want)
		}
		if _, err := New(tc.cfg, nil); err == nil {
			t.Errorf("%s: New accepted it", tc.name)
		}
	}
}

func TestConfigValidValues(t *testing.T) {
	for _, voice := range []string{"en-us", "en-gb+f3", "gmw/en-US", "cmn", "de_DE", "en+whisper"} {
		c := DefaultConfig()
		c.Espeak.Voice = voice
		if err := c.Validate(); err != nil {
			t.Errorf("voice %q: %v", voice, err)
		}
	}
	for _, speed := range []float64{0.25, 1, 4} {
		c := DefaultConfig()
		c.Engine = EngineOpenAI
		c.OpenAI.Speed = speed
		c.OpenAI.Format = "pcm"
		c.OpenAI.BaseURL = "https://127.0.0.1:8443/v1"
		if err := c.Validate(); err != nil {
			t.Errorf("speed %g: %v", speed, err)
		}
	}
	// Only the selected engine's section matters.
	c := DefaultConfig()
	c.OpenAI.Format = "mp3"
	if err := c.Validate(); err != nil {
		t.Errorf("espeak-ng with an unused, invalid openai section: %v", err)
	}
}

func TestNewOpenAIWithoutHTTPClient(t *testing.T) {
	s := fakellmtest.Start(t)
	cfg := openAIConfig(s.URL())
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Synthesize(testCtx(t), "hi"); err != nil {
		t.Errorf("nil http.Client: %v", err)
	}
}

func TestEngineNoneTurnsSpeechOff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Engine = EngineNone
	cfg.Espeak.Voice = "not a valid voice!" // unused sections are not checked
	e, err := New(cfg, nil)
	if err != nil || e != nil {
		t.Fatalf("New(none) = %v, %v; want no engine and no error", e, err)
	}
}
