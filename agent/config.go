package agent

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Config is one character's LLM connection. Every OpenAI-compatible server
// works: Ollama (http://127.0.0.1:11434/v1), llama.cpp server
// (http://127.0.0.1:8080/v1), vLLM, OpenAI itself.
type Config struct {
	BaseURL     string   `yaml:"base_url"`
	APIKey      string   `yaml:"api_key"`
	Model       string   `yaml:"model"`
	Temperature *float32 `yaml:"temperature"`
	MaxTokens   int      `yaml:"max_tokens"`
	// IdleTimeout bounds the wait for the first token and between two
	// streamed chunks, so a hung LLM server ends the turn with an error
	// instead of leaving the client "Thinking..." forever.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ContextWindow is the model's context in tokens: koe fits every
	// request into it (less a 5% margin), dropping the oldest turns first.
	ContextWindow int `yaml:"context_window"`
	// StreamUsage asks the server to report token usage at the end of a
	// stream (stream_options.include_usage); koe calibrates its own counts
	// with it. Turn it off for a server that rejects the option.
	StreamUsage bool `yaml:"stream_usage"`
	// Vision: the model accepts images (llava, qwen2.5-vl, gpt-4o…).
	// When false, images are not sent; the model is told one was shared.
	Vision bool `yaml:"vision"`
}

// DefaultConfig points at a local Ollama, the most common set-up.
func DefaultConfig() Config {
	return Config{
		BaseURL:       "http://127.0.0.1:11434/v1",
		Model:         "qwen2.5:7b",
		IdleTimeout:   60 * time.Second,
		ContextWindow: DefaultContextWindow,
		StreamUsage:   true,
	}
}

// Validate reports settings that can never work.
func (c Config) Validate() error {
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("llm.base_url %q is not an http(s) URL (example: http://127.0.0.1:11434/v1)", c.BaseURL)
	}
	if c.Model == "" {
		return errors.New("llm.model is empty: set it in the config file or KOE_LLM_MODEL")
	}
	if c.ContextWindow < 512 {
		return fmt.Errorf("llm.context_window %d is too small (at least 512 tokens)", c.ContextWindow)
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("llm.idle_timeout %s is negative", c.IdleTimeout)
	}
	return nil
}
