package llm_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"koe/agent"
	"koe/llm"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

// pooledClient is a client with a connection pool of its own.
func pooledClient(t *testing.T) *http.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// A server that restarted while koe kept a connection to it alive resets
// that connection when koe next uses it. Nothing of the reply had
// arrived: the turn is sent again on a new connection, and succeeds.
func TestStreamRetriesOnStaleConnection(t *testing.T) {
	tokens := fakellm.Words("Still here.")
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens}))
	s.SetResetReused(true)
	hc := pooledClient(t)
	c := llm.New(agent.Config{BaseURL: s.URL(), Model: "m", IdleTimeout: guard}, hc)

	fakellmtest.KeptAlive(t, s, hc)
	got, err := collect(testCtx(t), c, userMsgs("hi"))
	if err != nil {
		t.Fatalf("Stream on a stale connection: %v", err)
	}
	if !reflect.DeepEqual(got, tokens) {
		t.Errorf("deltas %q, want %q once", got, tokens)
	}
	if n := s.Resets(); n != 1 {
		t.Errorf("the server reset %d requests, want 1: the test did not meet the stale connection", n)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the server answered %d chat requests, want 1", len(reqs))
	}
	// The mark that lets net/http send the request again stays in koe.
	for name := range reqs[0].Header {
		if strings.Contains(strings.ToLower(name), "idempotency") {
			t.Errorf("the request carried %s to the server", name)
		}
	}
}

func TestCompleteAndEmbedRetryOnStaleConnection(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"A summary."}}))
	s.SetResetReused(true)
	hc := pooledClient(t)
	// onStale runs call on a kept-alive connection that the server resets.
	onStale := func(what string, call func() error) {
		t.Helper()
		fakellmtest.KeptAlive(t, s, hc)
		resets := s.Resets()
		if err := call(); err != nil {
			t.Errorf("%s on a stale connection: %v", what, err)
		}
		if n := s.Resets() - resets; n != 1 {
			t.Errorf("%s: the server reset %d requests, want 1", what, n)
		}
	}

	c := llm.New(agent.Config{BaseURL: s.URL(), Model: "m", IdleTimeout: guard}, hc)
	onStale("Complete", func() error {
		_, _, err := c.Complete(testCtx(t), userMsgs("sum up"))
		return err
	})
	e := llm.NewEmbedder(llm.EmbeddingsConfig{BaseURL: s.URL(), Model: "m"}, hc)
	onStale("Embed", func() error {
		_, err := e.Embed(testCtx(t), []string{"a"})
		return err
	})
}

// Once any of the reply has arrived, a broken connection ends the turn:
// asking again would say the same words twice.
func TestStreamNoRetryOnceReplyStarted(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"One ", "two ", "three."}, BreakAfter: 1}))
	hc := pooledClient(t)
	c := llm.New(agent.Config{BaseURL: s.URL(), Model: "m", IdleTimeout: guard}, hc)

	fakellmtest.KeptAlive(t, s, hc)
	got, err := collect(testCtx(t), c, userMsgs("count"))
	if le := llmError(t, err); le.Kind != agent.KindBrokenStream {
		t.Errorf("kind %v, want KindBrokenStream: %v", le.Kind, err)
	}
	if !reflect.DeepEqual(got, []string{"One "}) {
		t.Errorf("deltas %q, want the first one once", got)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("the server got %d chat requests, want 1", n)
	}
}

// A connection dialled for the request that is reset is not a stale one:
// the server refused this request, and it is not sent again.
func TestStreamNoRetryOnNewConnection(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"One ", "two."}, BreakAfter: 1}))
	c := llm.New(agent.Config{BaseURL: s.URL(), Model: "m", IdleTimeout: guard}, pooledClient(t))
	if _, err := collect(testCtx(t), c, userMsgs("count")); err == nil {
		t.Fatal("no error from a broken stream")
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("the server got %d chat requests, want 1", n)
	}
}
