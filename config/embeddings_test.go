package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/llm"
)

// Without an embeddings section koe has no endpoint and ranks by keywords.
func TestEmbeddingsDefaults(t *testing.T) {
	cfg, err := config.Load(filepath.Join(t.TempDir(), "conf.yaml"), false, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Embeddings
	if e.Enabled() || e != llm.DefaultEmbeddingsConfig() || e.Timeout != 30*time.Second || e.QueryTimeout != 500*time.Millisecond || e.Batch != 32 {
		t.Errorf("embeddings = %+v", e)
	}
}

func TestEmbeddingsFromFileAndEnv(t *testing.T) {
	path := writeFile(t, t.TempDir(), "conf.yaml", `
embeddings:
  base_url: http://127.0.0.1:11434/v1
  api_key: from-file
  model: nomic-embed-text
  query_timeout: 250ms
  batch: 64
`)
	cfg, err := config.Load(path, true, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := llm.EmbeddingsConfig{BaseURL: "http://127.0.0.1:11434/v1", APIKey: "from-file", Model: "nomic-embed-text",
		Timeout: 30 * time.Second, QueryTimeout: 250 * time.Millisecond, Batch: 64,
		MaxResponseBytes: llm.DefaultEmbedMaxResponseBytes, MaxErrorBytes: 4096}
	if cfg.Embeddings != want {
		t.Errorf("embeddings = %+v, want %+v", cfg.Embeddings, want)
	}
	cfg, err = config.Load(path, true, env(map[string]string{"KOE_EMBEDDINGS_API_KEY": "sk-env", config.EnvAPIKey: "sk-chat"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Embeddings.APIKey != "sk-env" || cfg.Character.LLM.APIKey != "sk-chat" {
		t.Errorf("api keys: embeddings %q, llm %q; want each its own variable's", cfg.Embeddings.APIKey, cfg.Character.LLM.APIKey)
	}
}

func TestEmbeddingsValidated(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"model missing", "embeddings:\n  base_url: http://127.0.0.1:11434/v1\n", "embeddings.model is empty"},
		{"no port", "embeddings:\n  base_url: http://localhost/v1\n  model: m\n", `embeddings.base_url "http://localhost/v1" names no port`},
		{"not http", "embeddings:\n  base_url: localhost:11434\n  model: m\n", `embeddings.base_url "localhost:11434" is not an http(s) URL`},
		{"batch", "embeddings:\n  batch: 5000\n", "embeddings.batch 5000 is out of range"},
		{"negative timeout", "embeddings:\n  query_timeout: -1s\n", "embeddings.query_timeout -1s is negative"},
		{"unknown key", "embeddings:\n  modle: m\n", "unknown key embeddings.modle (did you mean model?)"},
		{"duration", "embeddings:\n  timeout: 30\n", "embeddings.timeout: expected a duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "conf.yaml", tc.yaml)
			_, err := config.Load(path, true, env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
