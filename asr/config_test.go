package asr

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if cfg.Engine != EnginePocketsphinx || cfg.Timeout != 30*time.Second {
		t.Errorf("defaults: %+v", cfg)
	}
	want := PocketsphinxConfig{
		Binary: "pocketsphinx_continuous",
		HMM:    "/usr/share/pocketsphinx/model/en-us/en-us",
		Dict:   "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict",
		LM:     "/usr/share/pocketsphinx/model/en-us/en-us.lm.bin",
	}
	if cfg.Pocketsphinx != want {
		t.Errorf("pocketsphinx defaults %+v, want %+v", cfg.Pocketsphinx, want)
	}
	if o := cfg.OpenAI; o != (OpenAIConfig{BaseURL: "http://127.0.0.1:8000/v1", Model: "whisper-1", MaxResponseBytes: 1 << 20, MaxErrorBytes: 4096}) {
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
	sphinx := func(f func(*PocketsphinxConfig)) Config {
		c := DefaultConfig()
		f(&c.Pocketsphinx)
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
		{"unknown engine", func() Config { c := DefaultConfig(); c.Engine = "whisper.cpp"; return c }(), "asr.engine"},
		{"empty engine", func() Config { c := DefaultConfig(); c.Engine = ""; return c }(), "asr.engine"},
		{"negative timeout", func() Config { c := DefaultConfig(); c.Timeout = -time.Second; return c }(), "asr.timeout"},
		{"empty binary", sphinx(func(p *PocketsphinxConfig) { p.Binary = "" }), "asr.pocketsphinx.binary"},
		{"empty hmm", sphinx(func(p *PocketsphinxConfig) { p.HMM = "" }), "asr.pocketsphinx.hmm"},
		{"empty dict", sphinx(func(p *PocketsphinxConfig) { p.Dict = "" }), "asr.pocketsphinx.dict"},
		{"empty lm", sphinx(func(p *PocketsphinxConfig) { p.LM = "" }), "asr.pocketsphinx.lm"},
		{"base url empty", openai(func(o *OpenAIConfig) { o.BaseURL = "" }), "asr.openai.base_url"},
		{"base url no scheme", openai(func(o *OpenAIConfig) { o.BaseURL = "127.0.0.1:8000/v1" }), "asr.openai.base_url"},
		{"base url ftp", openai(func(o *OpenAIConfig) { o.BaseURL = "ftp://host/v1" }), "asr.openai.base_url"},
		{"base url no host", openai(func(o *OpenAIConfig) { o.BaseURL = "http:///v1" }), "asr.openai.base_url"},
		{"empty model", openai(func(o *OpenAIConfig) { o.Model = "" }), "asr.openai.model"},
		{"language name", openai(func(o *OpenAIConfig) { o.Language = "english" }), "asr.openai.language"},
		{"language upper", openai(func(o *OpenAIConfig) { o.Language = "EN" }), "asr.openai.language"},
		{"language locale", openai(func(o *OpenAIConfig) { o.Language = "en-US" }), "asr.openai.language"},
		{"language one letter", openai(func(o *OpenAIConfig) { o.Language = "e" }), "asr.openai.language"},
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
	for _, lang := range []string{"", "en", "de", "ja", "zh"} {
		c := DefaultConfig()
		c.Engine = EngineOpenAI
		c.OpenAI.Language = lang
		c.OpenAI.BaseURL = "https://127.0.0.1:8443/v1"
		c.OpenAI.Prompt = "Any text at all: -v --help"
		if err := c.Validate(); err != nil {
			t.Errorf("language %q: %v", lang, err)
		}
	}
	// Only the selected engine's section matters.
	c := DefaultConfig()
	c.OpenAI.BaseURL = "not a url"
	if err := c.Validate(); err != nil {
		t.Errorf("pocketsphinx with an unused, invalid openai section: %v", err)
	}
	c = DefaultConfig()
	c.Engine = EngineOpenAI
	c.Pocketsphinx = PocketsphinxConfig{}
	if err := c.Validate(); err != nil {
		t.Errorf("openai with an unused, empty pocketsphinx section: %v", err)
	}
}

func TestConfigEngineNoneTurnsSpeechInputOff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Engine = EngineNone
	cfg.Pocketsphinx.Binary = "" // unused sections are not checked
	cfg.OpenAI.BaseURL = ""
	e, err := New(cfg, nil)
	if err != nil || e != nil {
		t.Fatalf("New(none) = %v, %v; want no engine and no error", e, err)
	}
}
