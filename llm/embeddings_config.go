package llm

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"koe/agent"
)

// EmbeddingsConfig is the top-level `embeddings:` section: the
// OpenAI-compatible /v1/embeddings endpoint that long-term recall and the
// knowledge base rank with, besides keywords. BaseURL "" means no
// endpoint: everything ranks by keywords only.
type EmbeddingsConfig struct {
	BaseURL string `yaml:"base_url"` // e.g. http://127.0.0.1:11434/v1
	APIKey  string `yaml:"api_key"`
	Model   string `yaml:"model"` // e.g. nomic-embed-text
	// Timeout bounds one request while indexing (0: DefaultEmbedTimeout).
	Timeout time.Duration `yaml:"timeout"`
	// QueryTimeout bounds embedding a question during a live turn (0:
	// DefaultEmbedQueryTimeout): past it the turn ranks by keywords alone
	// rather than keep the user waiting.
	QueryTimeout time.Duration `yaml:"query_timeout"`
	// Batch is the most texts sent in one request (0: DefaultEmbedBatch).
	Batch int `yaml:"batch"`
}

// Defaults and bounds of the embeddings section. MaxEmbedBatch is OpenAI's
// limit on inputs per request.
const (
	DefaultEmbedTimeout      = 30 * time.Second
	DefaultEmbedQueryTimeout = 500 * time.Millisecond
	DefaultEmbedBatch        = 32
	MaxEmbedBatch            = 2048
)

// EnvEmbeddingsAPIKey overrides embeddings.api_key, so that a key need not
// be written in the file.
const EnvEmbeddingsAPIKey = "KOE_EMBEDDINGS_API_KEY"

// ApplyEnv applies the environment overrides; getenv may be nil.
func (c *EmbeddingsConfig) ApplyEnv(getenv func(string) string) {
	if getenv == nil {
		return
	}
	if v := getenv(EnvEmbeddingsAPIKey); v != "" {
		c.APIKey = v
	}
}

// DefaultEmbeddingsConfig has no endpoint, so koe ranks by keywords until
// the user names one.
func DefaultEmbeddingsConfig() EmbeddingsConfig {
	return EmbeddingsConfig{Timeout: DefaultEmbedTimeout, QueryTimeout: DefaultEmbedQueryTimeout, Batch: DefaultEmbedBatch}
}

// Enabled reports whether an endpoint is configured.
func (c EmbeddingsConfig) Enabled() bool { return strings.TrimSpace(c.BaseURL) != "" }

// Validate reports settings that can never work. Without an endpoint only
// the numbers are checked.
func (c EmbeddingsConfig) Validate() error {
	for _, t := range []struct {
		key   string
		value time.Duration
	}{{"embeddings.timeout", c.Timeout}, {"embeddings.query_timeout", c.QueryTimeout}} {
		if t.value < 0 {
			return fmt.Errorf("%s %s is negative", t.key, t.value)
		}
	}
	if c.Batch < 0 || c.Batch > MaxEmbedBatch {
		return fmt.Errorf("embeddings.batch %d is out of range: 1 to %d texts per request (default %d)", c.Batch, MaxEmbedBatch, DefaultEmbedBatch)
	}
	if !c.Enabled() {
		return nil
	}
	if err := agent.CheckBaseURL("embeddings.base_url", c.BaseURL); err != nil {
		return err
	}
	if c.Model == "" {
		return errors.New("embeddings.model is empty: name the embedding model the server serves, e.g. nomic-embed-text (Ollama) or text-embedding-3-small (OpenAI), or leave embeddings.base_url empty to rank by keywords only")
	}
	return nil
}

// withDefaults fills the zero values that mean "the default".
func (c EmbeddingsConfig) withDefaults() EmbeddingsConfig {
	if c.Timeout == 0 {
		c.Timeout = DefaultEmbedTimeout
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = DefaultEmbedQueryTimeout
	}
	if c.Batch == 0 {
		c.Batch = DefaultEmbedBatch
	}
	return c
}
