package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"koe/agent"
	"koe/llm"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

// guard bounds every test that talks to a server; it is a safety net
// against hangs, not a speed assertion.
const guard = 30 * time.Second

// startLLM starts a fake OpenAI-compatible server that, like llama.cpp
// serving a model whose chat template needs them, refuses requests whose
// roles do not alternate: every request koe sends must pass.
func startLLM(t *testing.T, respond func(fakellm.Request) fakellm.Reply) *fakellm.Server {
	t.Helper()
	s := fakellmtest.StartWith(t, respond)
	s.SetStrictRoles(true)
	return s
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

// clientFor is the real client (package llm) for the fake server.
func clientFor(s *fakellm.Server, mutate ...func(*agent.Config)) *llm.Client {
	cfg := agent.Config{BaseURL: s.URL(), APIKey: "sk-test", Model: "test-model", IdleTimeout: guard}
	for _, m := range mutate {
		m(&cfg)
	}
	return llm.New(cfg, nil)
}

func llmError(t *testing.T, err error) *agent.LLMError {
	t.Helper()
	if err == nil {
		t.Fatal("succeeded, want an error")
	}
	var le *agent.LLMError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) is not an *agent.LLMError", err, err)
	}
	return le
}
