package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koe/config"
)

// Every knowledge setting that can never work is refused at load, naming
// its key; the DSN comes from the environment when set there.
func TestKnowledgeSettings(t *testing.T) {
	bad := map[string]string{
		"store: cloud":                          "knowledge.store",
		"store: postgres":                       "knowledge.dsn",
		"router: maybe":                         "knowledge.router",
		"budget: 10":                            "knowledge.budget",
		"whole_share: 0.95":                     "knowledge.whole_share",
		"min_match: 2":                          "knowledge.min_match",
		"chunk_tokens: 8":                       "knowledge.chunk_tokens",
		"chunk_overlap: 200":                    "knowledge.chunk_overlap",
		"max_file_bytes: 0":                     "knowledge.max_file_bytes",
		"max_documents: 0":                      "knowledge.max_documents",
		"chunk_tokens: 64\n  chunk_overlap: 40": "knowledge.chunk_overlap",
	}
	for setting, key := range bad {
		path := filepath.Join(t.TempDir(), "conf.yaml")
		if err := os.WriteFile(path, []byte("knowledge:\n  "+setting+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(path, false, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: err %v, want one naming %s", setting, err, key)
		}
	}
	path := filepath.Join(t.TempDir(), "conf.yaml")
	if err := os.WriteFile(path, []byte("knowledge:\n  store: postgres\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, false, func(k string) string {
		if k == "KOE_KNOWLEDGE_DSN" {
			return "postgres://koe@127.0.0.1/koe"
		}
		return ""
	})
	if err != nil || cfg.Knowledge.DSN != "postgres://koe@127.0.0.1/koe" {
		t.Fatalf("dsn from env: %q, err %v", cfg.Knowledge.DSN, err)
	}
}
