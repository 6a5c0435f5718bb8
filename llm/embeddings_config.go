package llm

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"koe/agent"
	"koe/internal/modelhttp"
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
	// MaxResponseBytes bounds one answer, read as it arrives (0:
	// DefaultEmbedMaxResponseBytes): a broken or hostile server cannot
	// take koe's memory. A batch of 32 vectors of 3,072 dimensions is
	// about 2 MB.
	MaxResponseBytes int `yaml:"max_response_bytes"`
	// MaxErrorBytes is how much of an error answer koe reads (0:
	// DefaultEmbedMaxErrorBytes); the rest is cut off, marked "…".
	MaxErrorBytes int `yaml:"max_error_bytes"`
}

// Defaults and bounds of the embeddings section. MaxEmbedBatch is OpenAI's
// limit on inputs per request.
const (
	DefaultEmbedTimeout      = 30 * time.Second
	DefaultEmbedQueryTimeout = 500 * time.Millisecond
	DefaultEmbedBatch        = 32
	MaxEmbedBatch            = 2048
	// DefaultEmbedMaxResponseBytes and the least it may be.
	DefaultEmbedMaxResponseBytes = 32 << 20
	MinEmbedMaxResponseBytes     = 64 << 10
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
	return EmbeddingsConfig{
		Timeout: DefaultEmbedTimeout, QueryTimeout: DefaultEmbedQueryTimeout, Batch: DefaultEmbedBatch,
		MaxResponseBytes: DefaultEmbedMaxResponseBytes, MaxErrorBytes: agent.DefaultMaxErrorBytes,
	}
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
	if err := modelhttp.CheckSetting("embeddings.max_response_bytes", c.MaxResponseBytes, MinEmbedMaxResponseBytes, DefaultEmbedMaxResponseBytes); err != nil {
		return err
	}
	if err := modelhttp.CheckSetting("embeddings.max_error_bytes", c.MaxErrorBytes, agent.MinMaxErrorBytes, agent.DefaultMaxErrorBytes); err != nil {
		return err
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
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultEmbedMaxResponseBytes
	}
	if c.MaxErrorBytes == 0 {
		c.MaxErrorBytes = agent.DefaultMaxErrorBytes
	}
	return c
}
