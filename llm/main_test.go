package llm_test

import (
	"os"
	"testing"

	"koe/agent"
)

// TestMain builds the tokenizer's vocabulary first, as koe does at start:
// under the race detector on a loaded machine that takes seconds, which
// must not eat into a test's hang guard.
func TestMain(m *testing.M) {
	agent.NewTokenizer("test-model").Count("warm up")
	os.Exit(m.Run())
}
