package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"koe/testkit"
	"koe/testkit/koetest"
)

// A koe with server.auth_token, pointed at koe-load's standalone fake LLM
// (-serve-llm) for its replies and its speech, is measured with -token:
// every session connects and hears its reply. Without the token none
// connects.
func TestTokenAgainstServedLLM(t *testing.T) {
	o := options{n: 3, tps: 1000, reply: defaultReply, text: "hello", timeout: testkit.HangGuard, dialRate: 3}
	llm, err := startFakeLLM("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llm.Close() })
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), llm.URL()), llm)
	cfg.Server.AuthToken = "load-token-0123456789abcdef"
	k := koetest.StartKoe(t, cfg)
	tgt := target{name: targetKoe, url: "ws://" + k.Addr() + "/client-ws"}

	t.Setenv(envAuthToken, "") // the flag's fallback, not the caller's
	without, err := measure(context.Background(), o, tgt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if without.open != 0 || len(without.dialErrs) != o.n {
		t.Fatalf("without -token: %d open, %d refused; want all %d refused", without.open, len(without.dialErrs), o.n)
	}
	if err := without.dialErrs[0]; !strings.Contains(err.Error(), "-token") {
		t.Errorf("a refusal for want of the token does not say so: %v", err)
	}

	o.token = cfg.Server.AuthToken
	m, err := measure(context.Background(), o, tgt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.open != o.n || len(m.turnErrs) != 0 || len(m.first) != o.n {
		t.Fatalf("with -token: %d open, connect errors %v, turn errors %v, %d replies heard; want %d of each",
			m.open, m.dialErrs, m.turnErrs, len(m.first), o.n)
	}
}

// -serve-llm says where the fake LLM is and how to point koe at it, and
// stops when told.
func TestServeLLMSaysWhere(t *testing.T) {
	o := options{serveLLM: "127.0.0.1:0", tps: 30, reply: defaultReply}
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- serveLLM(ctx, o, out) }()
	said := testkit.Await(t, "-serve-llm says where it listens", func() (string, bool) {
		s := out.String()
		return s, strings.Contains(s, "OPENAI_BASE_URL=http://127.0.0.1:")
	})
	if !strings.Contains(said, "KOE_LLM_MODEL=fake-model") || strings.Contains(said, "answers anyone") {
		t.Errorf("-serve-llm said:\n%s", said)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveLLM: %v", err)
	}
}

// lockedBuffer is a buffer one goroutine writes while another reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
