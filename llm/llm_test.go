package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"koe/agent"
	"koe/llm"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

// guard bounds every test that talks to a server; it is a safety net
// against hangs, not a speed assertion.
const guard = 30 * time.Second

func startLLM(t *testing.T, respond func(fakellm.Request) fakellm.Reply) *fakellm.Server {
	t.Helper()
	return fakellmtest.StartWith(t, respond)
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

func clientFor(s *fakellm.Server, mutate ...func(*agent.Config)) *llm.Client {
	cfg := agent.Config{BaseURL: s.URL(), APIKey: "sk-test", Model: "test-model", IdleTimeout: guard}
	for _, m := range mutate {
		m(&cfg)
	}
	return llm.New(cfg, nil)
}

func userMsgs(text string) agent.Request {
	return agent.Request{Messages: []agent.WireMessage{{Role: agent.RoleUser, Content: text}}}
}

// collect streams and returns the deltas it received.
func collect(ctx context.Context, c *llm.Client, req agent.Request) ([]string, error) {
	var got []string
	_, err := c.Stream(ctx, req, func(d string) { got = append(got, d) })
	return got, err
}

func TestStreamDeltasInOrder(t *testing.T) {
	const text = "Hello there. How are you today? 你好。"
	tokens := fakellm.Words(text)
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens}))
	got, err := collect(testCtx(t), clientFor(s), userMsgs("hi"))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if !reflect.DeepEqual(got, tokens) {
		t.Errorf("deltas = %q, want %q", got, tokens)
	}
	if strings.Join(got, "") != text {
		t.Errorf("reply = %q, want %q", strings.Join(got, ""), text)
	}
}

func TestStreamRequest(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
	temp := float32(0.7)
	c := clientFor(s, func(c *agent.Config) { c.Temperature = &temp; c.MaxReplyTokens = 321 })
	msgs := agent.Request{Messages: []agent.WireMessage{
		{Role: agent.RoleSystem, Content: "be brief"},
		{Role: agent.RoleUser, Content: "hi"},
		{Role: agent.RoleAssistant, Content: "hello"},
		{Role: agent.RoleUser, Content: "how are you?"},
	}}
	if _, err := collect(testCtx(t), c, msgs); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "test-model" || !r.Stream {
		t.Errorf("model=%q stream=%v, want test-model true", r.Model, r.Stream)
	}
	want := []fakellm.Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "hi"},
		{Role: "assistant", Content: "hello"},
		{Role: "user", Content: "how are you?"},
	}
	if !reflect.DeepEqual(r.Messages, want) {
		t.Errorf("messages = %+v, want %+v", r.Messages, want)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want Bearer sk-test", got)
	}
	var raw map[string]any
	if err := json.Unmarshal(r.Raw, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["temperature"] != 0.7 {
		t.Errorf("temperature = %v, want 0.7 (body %s)", raw["temperature"], r.Raw)
	}
	if raw["max_tokens"] != float64(321) {
		t.Errorf("max_tokens = %v, want 321 (body %s)", raw["max_tokens"], r.Raw)
	}
}

func TestStreamRequestWithoutTemperature(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
	if _, err := collect(testCtx(t), clientFor(s), userMsgs("hi")); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(s.Requests()[0].Raw, &raw); err != nil {
		t.Fatal(err)
	}
	// Unset means the server's default, not 0.
	if v, ok := raw["temperature"]; ok {
		t.Errorf("temperature = %v sent although not configured", v)
	}
}

// closedURL returns the base URL of a listener that no longer exists.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/v1"
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return url
}

func llmError(t *testing.T, err error) *agent.LLMError {
	t.Helper()
	if err == nil {
		t.Fatal("Stream succeeded, want an error")
	}
	var le *agent.LLMError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) is not an *agent.LLMError", err, err)
	}
	return le
}

func TestStreamUnreachable(t *testing.T) {
	url := closedURL(t)
	c := llm.New(agent.Config{BaseURL: url, Model: "m", IdleTimeout: guard}, nil)
	called := false
	_, err := c.Stream(testCtx(t), userMsgs("hi"), func(string) { called = true })
	le := llmError(t, err)
	if le.Kind != agent.KindUnreachable {
		t.Errorf("kind = %v, want KindUnreachable (%v)", le.Kind, err)
	}
	if le.BaseURL != url {
		t.Errorf("BaseURL = %q, want %q", le.BaseURL, url)
	}
	for _, want := range []string{url, "OPENAI_BASE_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not contain %q", err, want)
		}
	}
	if called {
		t.Error("onDelta called for an unreachable server")
	}
	if errors.Is(err, context.Canceled) {
		t.Error("an unreachable server is reported as a cancellation")
	}
}

func TestStreamHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		status  int
		kind    agent.ErrorKind
		mention []string
	}{
		{http.StatusUnauthorized, agent.KindUnauthorized, []string{"OPENAI_API_KEY", "401"}},
		{http.StatusForbidden, agent.KindUnauthorized, []string{"OPENAI_API_KEY", "403"}},
		{http.StatusNotFound, agent.KindNotFound, []string{"KOE_LLM_MODEL", `"test-model"`, "404"}},
		{http.StatusTooManyRequests, agent.KindRateLimited, []string{"429"}},
		{http.StatusInternalServerError, agent.KindServer, []string{"500"}},
		{http.StatusServiceUnavailable, agent.KindServer, []string{"503"}},
		{http.StatusBadRequest, agent.KindBadRequest, []string{"400", `"test-model"`}},
		{http.StatusUnprocessableEntity, agent.KindBadRequest, []string{"422"}},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			detail := "fake says no " + http.StatusText(tc.status)
			s := startLLM(t, fakellm.Script(fakellm.Reply{Status: tc.status, ErrorMessage: detail}))
			called := false
			_, err := clientFor(s).Stream(testCtx(t), userMsgs("hi"), func(string) { called = true })
			le := llmError(t, err)
			if le.Kind != tc.kind {
				t.Errorf("kind = %v, want %v (%v)", le.Kind, tc.kind, err)
			}
			if le.Status != tc.status {
				t.Errorf("status = %d, want %d", le.Status, tc.status)
			}
			msg := err.Error()
			for _, want := range append(tc.mention, s.URL(), detail) {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not contain %q", msg, want)
				}
			}
			if called {
				t.Error("onDelta called for an error response")
			}
		})
	}
}

func TestStreamBrokenAfterDeltas(t *testing.T) {
	tokens := []string{"One", " two", " three", " four"}
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens, BreakAfter: 2}))
	got, err := collect(testCtx(t), clientFor(s), userMsgs("count"))
	le := llmError(t, err)
	if le.Kind != agent.KindBrokenStream {
		t.Errorf("kind = %v, want KindBrokenStream (%v)", le.Kind, err)
	}
	if want := tokens[:2]; !reflect.DeepEqual(got, want) {
		t.Errorf("deltas before the break = %q, want %q", got, want)
	}
	if errors.Is(err, context.Canceled) {
		t.Error("a broken stream is reported as a cancellation")
	}
}

func TestStreamIdleTimeout(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Hang: true}))
	c := clientFor(s, func(c *agent.Config) { c.IdleTimeout = 200 * time.Millisecond })
	got, err := collect(testCtx(t), c, userMsgs("hi"))
	le := llmError(t, err)
	if le.Kind != agent.KindTimeout {
		t.Errorf("kind = %v, want KindTimeout (%v)", le.Kind, err)
	}
	if len(got) != 0 {
		t.Errorf("deltas = %q, want none", got)
	}
	for _, want := range []string{s.URL(), "idle_timeout", "test-model"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not contain %q", err, want)
		}
	}
}

// The idle timeout bounds the gap between chunks, not the whole reply: a
// slow but steady stream must finish even if it takes longer overall (here
// at least 3 s, each gap at least 0.6 s, against a 2 s timeout).
func TestStreamIdleTimeoutResetsPerChunk(t *testing.T) {
	tokens := []string{"a", "b", "c", "d", "e"}
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens, Interval: 600 * time.Millisecond}))
	c := clientFor(s, func(c *agent.Config) { c.IdleTimeout = 2 * time.Second })
	got, err := collect(testCtx(t), c, userMsgs("hi"))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if !reflect.DeepEqual(got, tokens) {
		t.Errorf("deltas = %q, want %q", got, tokens)
	}
}

func TestStreamCancelMidStream(t *testing.T) {
	tokens := fakellm.Words(strings.Repeat("word ", 200))
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens, Interval: 20 * time.Millisecond}))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var got []string
	_, err := clientFor(s).Stream(ctx, userMsgs("talk"), func(d string) {
		got = append(got, d)
		if len(got) == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var le *agent.LLMError
	if errors.As(err, &le) {
		t.Errorf("cancellation reported as an LLMError: %v", le)
	}
	if len(got) < 2 || len(got) >= len(tokens) {
		t.Errorf("received %d deltas, want the stream cut after 2 (of %d)", len(got), len(tokens))
	}
	select {
	case <-s.Disconnects():
	case <-time.After(guard):
		t.Fatal("the fake LLM never saw the client disconnect")
	}
}

func TestStreamCancelledBeforeStart(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"x"}}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := clientFor(s).Stream(ctx, userMsgs("hi"), func(string) { t.Error("onDelta called") })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var le *agent.LLMError
	if errors.As(err, &le) {
		t.Errorf("cancellation reported as an LLMError: %v", le)
	}
}

// promptTokens is what the fake LLM reports as prompt_tokens: a quarter of
// the characters of the message contents.
func promptTokens(req agent.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += len([]rune(m.Content))
	}
	return n / 4
}

// rawField decodes the request body and returns one top-level field.
func rawField(t *testing.T, r fakellm.Request, name string) (any, bool) {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(r.Raw, &raw); err != nil {
		t.Fatalf("request body: %v", err)
	}
	v, ok := raw[name]
	return v, ok
}

func TestStreamUsage(t *testing.T) {
	tokens := []string{"Fine", ",", " thanks", "."}
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens}))
	c := clientFor(s, func(c *agent.Config) { c.StreamUsage = true })
	msgs := agent.Request{Messages: []agent.WireMessage{
		{Role: agent.RoleSystem, Content: "You are a helpful voice assistant; be brief."},
		{Role: agent.RoleUser, Content: "How are you today? Tell me everything, über alles."},
	}}
	var got []string
	res, err := c.Stream(testCtx(t), msgs, func(d string) { got = append(got, d) })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if !reflect.DeepEqual(got, tokens) {
		t.Errorf("deltas = %q, want %q (the usage chunk has no choices)", got, tokens)
	}
	want := &agent.Usage{PromptTokens: promptTokens(msgs), CompletionTokens: len(tokens)}
	if want.PromptTokens == 0 {
		t.Fatal("test messages too short for a non-zero prompt count")
	}
	if !reflect.DeepEqual(res.Usage, want) {
		t.Errorf("usage = %+v, want %+v", res.Usage, want)
	}
	if res.FinishReason != "stop" {
		t.Errorf("finish reason = %q, want the server's \"stop\"", res.FinishReason)
	}
	opts, ok := rawField(t, s.Requests()[0], "stream_options")
	if !ok || !reflect.DeepEqual(opts, map[string]any{"include_usage": true}) {
		t.Errorf("stream_options = %v (sent: %v), want {include_usage: true}", opts, ok)
	}
}

func TestStreamWithoutUsage(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
	c := clientFor(s, func(c *agent.Config) { c.StreamUsage = false })
	res, err := c.Stream(testCtx(t), userMsgs("a question long enough to count"), func(string) {})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if res.Usage != nil {
		t.Errorf("usage = %+v without stream_usage, want nil", res.Usage)
	}
	if v, ok := rawField(t, s.Requests()[0], "stream_options"); ok {
		t.Errorf("stream_options = %v sent although stream_usage is off (body %s)", v, s.Requests()[0].Raw)
	}
}

func TestComplete(t *testing.T) {
	tokens := fakellm.Words("Ann asked about the weather; Testa said rain.")
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens}))
	temp := float32(0.2)
	// StreamUsage only concerns streams: Complete never sends stream_options.
	c := clientFor(s, func(c *agent.Config) { c.Temperature = &temp; c.StreamUsage = true })
	msgs := agent.Request{Messages: []agent.WireMessage{
		{Role: agent.RoleSystem, Content: "Summarise the conversation below."},
		{Role: agent.RoleUser, Content: "Ann: will it rain?\nTesta: yes."},
	}}
	text, usage, err := c.Complete(testCtx(t), msgs)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if want := strings.Join(tokens, ""); text != want {
		t.Errorf("text = %q, want %q", text, want)
	}
	want := &agent.Usage{PromptTokens: promptTokens(msgs), CompletionTokens: len(tokens)}
	if !reflect.DeepEqual(usage, want) {
		t.Errorf("usage = %+v, want %+v", usage, want)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Stream || r.Model != "test-model" {
		t.Errorf("stream=%v model=%q, want a non-stream request for test-model", r.Stream, r.Model)
	}
	wantMsgs := []fakellm.Message{
		{Role: "system", Content: msgs.Messages[0].Content},
		{Role: "user", Content: msgs.Messages[1].Content},
	}
	if !reflect.DeepEqual(r.Messages, wantMsgs) {
		t.Errorf("messages = %+v, want %+v", r.Messages, wantMsgs)
	}
	if v, ok := rawField(t, r, "stream_options"); ok {
		t.Errorf("stream_options = %v on a non-stream request", v)
	}
	if v, _ := rawField(t, r, "temperature"); v != 0.2 {
		t.Errorf("temperature = %v, want 0.2", v)
	}
}

func TestCompleteErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		kind   agent.ErrorKind
	}{
		{http.StatusUnauthorized, agent.KindUnauthorized},
		{http.StatusNotFound, agent.KindNotFound},
		{http.StatusTooManyRequests, agent.KindRateLimited},
		{http.StatusInternalServerError, agent.KindServer},
		{http.StatusBadRequest, agent.KindBadRequest},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			s := startLLM(t, fakellm.Script(fakellm.Reply{Status: tc.status, ErrorMessage: "fake says no"}))
			text, _, err := clientFor(s).Complete(testCtx(t), userMsgs("hi"))
			le := llmError(t, err)
			if le.Kind != tc.kind || le.Status != tc.status {
				t.Errorf("kind %v status %d, want %v %d (%v)", le.Kind, le.Status, tc.kind, tc.status, err)
			}
			if !strings.Contains(err.Error(), "fake says no") || !strings.Contains(err.Error(), s.URL()) {
				t.Errorf("message %q lacks the detail or the URL", err)
			}
			if text != "" {
				t.Errorf("text = %q on error", text)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		url := closedURL(t)
		c := llm.New(agent.Config{BaseURL: url, Model: "m"}, nil)
		_, _, err := c.Complete(testCtx(t), userMsgs("hi"))
		if le := llmError(t, err); le.Kind != agent.KindUnreachable {
			t.Errorf("kind = %v, want KindUnreachable (%v)", le.Kind, err)
		}
	})
	t.Run("no choices", func(t *testing.T) {
		s := startLLM(t, fakellm.Script(fakellm.Reply{
			ContentType: "application/json",
			Body:        `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":0}}`,
		}))
		c := clientFor(s)
		_, usage, err := c.Complete(testCtx(t), userMsgs("hi"))
		if le := llmError(t, err); le.Kind != agent.KindBadRequest {
			t.Errorf("kind = %v, want KindBadRequest (%v)", le.Kind, err)
		}
		if usage == nil || usage.PromptTokens != 5 {
			t.Errorf("usage = %+v, want the reported prompt_tokens 5", usage)
		}
	})
}

// Cancelling a completion (a summary when its agent closes) closes the HTTP
// request, so the LLM server stops working on it.
func TestCompleteCancel(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Hang: true}))
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, _, err := clientFor(s).Complete(ctx, userMsgs("hi"))
		done <- err
	}()
	testkit.Eventually(t, "the request to arrive", func() bool { return len(s.Requests()) == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		var le *agent.LLMError
		if errors.As(err, &le) {
			t.Errorf("cancellation reported as an LLMError: %v", le)
		}
	case <-time.After(guard):
		t.Fatal("Complete did not return after its context was cancelled")
	}
	select {
	case <-s.Disconnects():
	case <-time.After(guard):
		t.Fatal("the fake LLM never saw the client disconnect")
	}
}

func TestProbe(t *testing.T) {
	fake := startLLM(t, nil)
	ok := llm.New(agent.Config{BaseURL: fake.URL(), Model: fakellm.ModelID}, nil)
	if err := ok.Probe(context.Background()); err != nil {
		t.Fatalf("probe of a good server: %v", err)
	}
	wrong := llm.New(agent.Config{BaseURL: fake.URL(), Model: "llama9"}, nil)
	if err := wrong.Probe(context.Background()); err == nil || !strings.Contains(err.Error(), "KOE_LLM_MODEL") || !strings.Contains(err.Error(), fakellm.ModelID) {
		t.Fatalf("probe for an unknown model: %v", err)
	}
	down := llm.New(agent.Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}, nil)
	var le *agent.LLMError
	if err := down.Probe(context.Background()); !errors.As(err, &le) || le.Kind != agent.KindUnreachable {
		t.Fatalf("probe of a closed port: %v", err)
	}
}
