package llm_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"koe/agent"
	"koe/llm"
	"koe/testkit/fakellm"
)

// A stream with chunks but no text (the model stopped at once) is an
// error saying so, not a silent empty turn.
func TestStreamEmptyReply(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{}))
	got, err := collect(testCtx(t), clientFor(s), userMsgs("hi"))
	le := llmError(t, err)
	if le.Kind != agent.KindEmptyReply {
		t.Errorf("kind = %v, want KindEmptyReply (%v)", le.Kind, err)
	}
	for _, want := range []string{s.URL(), "no text", `"test-model"`, `finish_reason "stop"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not contain %q", err, want)
		}
	}
	if len(got) != 0 {
		t.Errorf("deltas = %q, want none", got)
	}
}

// htmlPage is a web server's welcome page, long enough (over go-openai's
// limit of 300 lines without an event) to fail differently from a short
// one.
var htmlPage = "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n<body>\n" +
	strings.Repeat("<p>If you see this page, the web server is working.</p>\n", 400) + "</body></html>\n"

// A 200 answer that is not a chat completion stream ends the turn with an
// error pointing at the base URL, naming the Content-Type when it is not
// an event stream.
func TestStreamNotAChatServer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   fakellm.Reply
		mention []string
	}{
		{"plain text", fakellm.Reply{Body: "Ollama is running"}, []string{`Content-Type "text/plain; charset=utf-8"`}},
		{"short html", fakellm.Reply{Body: "<html><body><h1>It works!</h1></body></html>\n", ContentType: "text/html"}, []string{`Content-Type "text/html"`}},
		{"long html", fakellm.Reply{Body: htmlPage, ContentType: "text/html; charset=utf-8"}, []string{`Content-Type "text/html; charset=utf-8"`}},
		{"only [DONE]", fakellm.Reply{Body: "data: [DONE]\n\n", ContentType: "text/event-stream"}, []string{"text/event-stream", "held no chat completion"}},
		{"a completion instead of a stream", fakellm.Reply{
			ContentType: "application/json",
			Body:        `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}`,
		}, []string{"application/json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startLLM(t, fakellm.Script(tc.reply))
			got, err := collect(testCtx(t), clientFor(s), userMsgs("hi"))
			le := llmError(t, err)
			if le.Kind != agent.KindEmptyReply {
				t.Errorf("kind = %v, want KindEmptyReply (%v)", le.Kind, err)
			}
			for _, want := range append(tc.mention, s.URL(), "answered but sent no text", "OpenAI-compatible /v1") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not contain %q", err, want)
				}
			}
			if len(got) != 0 {
				t.Errorf("deltas = %q, want none", got)
			}
		})
	}
}

func TestCompleteNotAChatServer(t *testing.T) {
	for _, reply := range []fakellm.Reply{
		{Body: "Ollama is running"},
		{Body: htmlPage, ContentType: "text/html; charset=utf-8"},
	} {
		s := startLLM(t, fakellm.Script(reply))
		_, _, err := clientFor(s).Complete(testCtx(t), userMsgs("hi"))
		le := llmError(t, err)
		if le.Kind != agent.KindEmptyReply || !strings.Contains(err.Error(), "OpenAI-compatible /v1") || !strings.Contains(err.Error(), "Content-Type") {
			t.Errorf("kind %v: %v; want KindEmptyReply pointing at the base URL", le.Kind, err)
		}
	}
}

// A model that never stops is stopped at llm.max_reply_tokens: the turn
// ends with an error naming the setting, the text before it was
// delivered, and the LLM server sees the request go away.
func TestStreamStopsPastMaxReplyTokens(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("and on and on and on, "), Endless: true}))
	const limit = 100
	c := clientFor(s, func(c *agent.Config) { c.MaxReplyTokens = limit })
	got, err := collect(testCtx(t), c, userMsgs("talk"))
	le := llmError(t, err)
	if le.Kind != agent.KindReplyTooLong {
		t.Fatalf("kind = %v, want KindReplyTooLong (%v)", le.Kind, err)
	}
	for _, want := range []string{"llm.max_reply_tokens", "100 tokens", s.URL()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not contain %q", err, want)
		}
	}
	text := strings.Join(got, "")
	tokens := agent.NewTokenizer("test-model").Count(text)
	// Counted in pieces, the reply may be estimated a token or two off.
	if tokens < limit-5 || tokens > limit+2 {
		t.Errorf("%d tokens delivered before the stop, want about %d", tokens, limit)
	}
	select {
	case <-s.Disconnects():
	case <-time.After(guard):
		t.Fatal("the fake LLM never saw the client disconnect")
	}
	if v, _ := rawField(t, s.Requests()[0], "max_tokens"); v != float64(limit) {
		t.Errorf("max_tokens = %v, want %d", v, limit)
	}
}

// A reply within the limit is not cut, in any script: the limit counts
// text, not deltas, and a long reply of short deltas passes.
func TestStreamWithinMaxReplyTokens(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. 今天天气很好。", 40)
	want := agent.NewTokenizer("test-model").Count(text)
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(text)}))
	c := clientFor(s, func(c *agent.Config) { c.MaxReplyTokens = want + 2 })
	got, err := collect(testCtx(t), c, userMsgs("talk"))
	if err != nil {
		t.Fatalf("a reply of %d tokens under a limit of %d: %v", want, want+2, err)
	}
	if strings.Join(got, "") != text {
		t.Error("the reply was not delivered whole")
	}
}

// max_tokens goes out as the resolved limit: max_reply_tokens, the older
// max_tokens key, or the default.
func TestMaxTokensSent(t *testing.T) {
	for _, tc := range []struct {
		maxReply, maxTokens, want int
	}{
		{0, 0, agent.DefaultMaxReplyTokens},
		{0, 500, 500},
		{300, 500, 300},
	} {
		s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
		c := clientFor(s, func(c *agent.Config) { c.MaxReplyTokens, c.MaxTokens = tc.maxReply, tc.maxTokens })
		if _, err := collect(testCtx(t), c, userMsgs("hi")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Complete(testCtx(t), userMsgs("hi")); err != nil {
			t.Fatal(err)
		}
		for _, r := range s.Requests() {
			if v, _ := rawField(t, r, "max_tokens"); v != float64(tc.want) {
				t.Errorf("%+v: max_tokens = %v (stream %v), want %d", tc, v, r.Stream, tc.want)
			}
		}
	}
}

// A slow consumer is not a silent LLM: while onDelta blocks (the client's
// send queue is full) the idle clock stands still, so running it out then
// ends nothing; run out while koe waits for the server, it ends the stream
// as an idle timeout.
func TestStreamSlowConsumerIsNotIdle(t *testing.T) {
	tokens := fakellm.Words("One two three four five six seven eight nine ten.")
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens}))
	c := clientFor(s, func(c *agent.Config) { c.IdleTimeout = time.Hour })
	clock := llm.UseManualClock(c)
	var got []string
	_, err := c.Stream(testCtx(t), userMsgs("count"), func(d string) {
		if clock.Expire() {
			t.Errorf("the idle clock ran while delta %d was being handed on", len(got))
		}
		got = append(got, d)
	})
	if err != nil {
		t.Fatalf("Stream with a slow consumer: %v", err)
	}
	if strings.Join(got, "") != strings.Join(tokens, "") {
		t.Errorf("deltas %q, want %q", got, tokens)
	}
}

// Run out while the server holds back its next chunk, the idle clock ends
// the stream with KindTimeout.
func TestStreamIdleServerTimesOut(t *testing.T) {
	returned := make(chan struct{})
	var clock *llm.ManualClock
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"One", " two", " three."}, BeforeChunk: func(i int) {
		if i == 1 {
			// The client may still be handing on the first delta
			// (its clock paused): wait until it waits for this chunk.
			clock.ExpireWhenRunning()
			// Hold the chunk back until the stream has given up, as a
			// hung server would; written at once, it could race the
			// cancellation and be read.
			<-returned
		}
	}}))
	c := clientFor(s, func(c *agent.Config) { c.IdleTimeout = time.Hour })
	clock = llm.UseManualClock(c)
	_, err := c.Stream(testCtx(t), userMsgs("count"), func(string) {})
	close(returned)
	if le := llmError(t, err); le.Kind != agent.KindTimeout {
		t.Fatalf("kind %v: %v; want a timeout", le.Kind, err)
	}
}

// A request a strict chat template refuses comes back as a bad request
// carrying the server's explanation (koe never sends one; see the agent's
// tests).
func TestStreamStrictTemplateRefusal(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
	s.SetStrictRoles(true)
	req := agent.Request{Messages: []agent.WireMessage{
		{Role: agent.RoleSystem, Content: "be brief"},
		{Role: agent.RoleUser, Content: "You are Testa."},
		{Role: agent.RoleUser, Content: "hi"},
	}}
	_, err := collect(testCtx(t), clientFor(s), req)
	le := llmError(t, err)
	if le.Kind != agent.KindBadRequest || le.Status != 400 || !strings.Contains(err.Error(), fakellm.AlternationError) {
		t.Errorf("kind %v status %d: %v; want a bad request quoting the template's error", le.Kind, le.Status, err)
	}
	// Joined, the same request passes.
	req.Messages = []agent.WireMessage{
		{Role: agent.RoleSystem, Content: "be brief"},
		{Role: agent.RoleUser, Content: "You are Testa.\n\nhi"},
	}
	if _, err := collect(testCtx(t), clientFor(s), req); err != nil {
		t.Errorf("alternating request refused: %v", err)
	}
}

// Images and tool calls reach the server in OpenAI's shapes.
func TestStreamPartsAndToolCalls(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
	req := agent.Request{
		Messages: []agent.WireMessage{
			{Role: agent.RoleSystem, Content: "be brief"},
			{Role: agent.RoleUser, Parts: []agent.ContentPart{
				{Text: "what is this?"},
				{ImageURL: "data:image/png;base64,iVBORw0KGgo=", Detail: agent.ImageDetailLow},
			}},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call_1", Name: "look", Arguments: `{"zoom":2}`}}},
			{Role: agent.RoleTool, ToolCallID: "call_1", Name: "look", Content: "a cat"},
		},
		Tools: []agent.ToolSpec{{Name: "look", Description: "Looks closer.", Parameters: []byte(`{"type":"object"}`)}},
	}
	if _, err := collect(testCtx(t), clientFor(s), req); err != nil {
		t.Fatal(err)
	}
	r := s.Requests()[0]
	if m := r.Messages[1]; m.Content != "what is this?" || m.Images != 1 {
		t.Errorf("user message received as %+v", m)
	}
	msgs, _ := rawField(t, r, "messages")
	want := []any{
		map[string]any{"role": "system", "content": "be brief"},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "what is this?"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}},
		}},
		map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
			"id": "call_1", "type": "function", "function": map[string]any{"name": "look", "arguments": `{"zoom":2}`},
		}}},
		map[string]any{"role": "tool", "content": "a cat", "name": "look", "tool_call_id": "call_1"},
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("messages sent as\n %v\nwant\n %v", msgs, want)
	}
	tools, _ := rawField(t, r, "tools")
	wantTools := []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "look", "description": "Looks closer.", "parameters": map[string]any{"type": "object"},
	}}}
	if !reflect.DeepEqual(tools, wantTools) {
		t.Errorf("tools sent as %v, want %v", tools, wantTools)
	}
}

// Cancelling while onDelta runs ends the stream as a cancellation, not as
// an idle timeout, whatever the idle clock would have said, and no delta
// already read ahead is handed on after it.
func TestStreamCancelDuringSlowConsumer(t *testing.T) {
	tokens := fakellm.Words(strings.Repeat("word ", 50))
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens}))
	c := clientFor(s, func(c *agent.Config) { c.IdleTimeout = time.Hour })
	clock := llm.UseManualClock(c)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	calls := 0
	_, err := c.Stream(ctx, userMsgs("talk"), func(string) {
		calls++
		cancel()
		clock.Expire() // the idle clock would have run out meanwhile
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if calls != 1 {
		t.Errorf("onDelta called %d times, want once: deltas after the cancellation were handed on", calls)
	}
}
