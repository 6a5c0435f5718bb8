package knowledge_test

import (
	"strings"
	"testing"
	"time"

	"koe/knowledge"
)

// The bounds of reading a file are refused at load when they can never
// work, naming their key.
func TestReadingBoundsAreValidated(t *testing.T) {
	if err := knowledge.DefaultConfig().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	bad := []struct {
		key    string
		mutate func(*knowledge.Config)
	}{
		{"knowledge.max_inflated_bytes", func(c *knowledge.Config) { c.MaxInflatedBytes = 1000 }},
		{"knowledge.max_inflated_bytes", func(c *knowledge.Config) { c.MaxInflatedBytes = 2 << 30 }},
		{"knowledge.max_document_tokens", func(c *knowledge.Config) { c.MaxDocumentTokens = 0 }},
		{"knowledge.ingest_timeout", func(c *knowledge.Config) { c.IngestTimeout = 10 * time.Millisecond }},
		{"knowledge.ingest_timeout", func(c *knowledge.Config) { c.IngestTimeout = 2 * time.Hour }},
		{"knowledge.max_concurrent_ingests", func(c *knowledge.Config) { c.MaxConcurrentIngests = 0 }},
		{"knowledge.max_concurrent_ingests", func(c *knowledge.Config) { c.MaxConcurrentIngests = 1000 }},
	}
	for _, b := range bad {
		c := knowledge.DefaultConfig()
		b.mutate(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), b.key+" ") {
			t.Errorf("%+v: err %v, want one naming %s", c, err, b.key)
		}
	}
}
