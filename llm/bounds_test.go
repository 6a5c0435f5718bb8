package llm_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"koe/agent"
	"koe/llm"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

// readSlack is what a client may read past a limit before it fails: the
// read that crossed it (go-openai reads through a 4 KiB buffer, json
// through a little more). Nothing near a megabyte.
const readSlack = 64 << 10

// eventHead starts a stream event whose text delta the flood fills.
const eventHead = `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`

func tooLarge(t *testing.T, err error, key string) *agent.LLMError {
	t.Helper()
	le := llmError(t, err)
	if le.Kind != agent.KindTooLarge {
		t.Fatalf("kind %v, want KindTooLarge: %v", le.Kind, err)
	}
	if msg := err.Error(); !strings.Contains(msg, key) || len(msg) > 500 {
		t.Errorf("error of %d bytes does not name %s in a few words: %.600s", len(msg), key, msg)
	}
	return le
}

func checkRead(t *testing.T, read *atomic.Int64, limit int) {
	t.Helper()
	if got := read.Load(); got > int64(limit)+readSlack {
		t.Errorf("koe read %d bytes of the answer; the limit is %d", got, limit)
	}
}

func TestStreamHugeTokenLine(t *testing.T) {
	// One token of 8 MiB in one line, as a hostile server may send.
	s := startLLM(t, fakellm.Script(fakellm.Reply{Flood: &fakellm.Flood{
		Head: eventHead, Fill: "hello ", Size: 8 << 20, Tail: `"}}]}` + "\n\n",
	}}))
	hc, read := fakellmtest.CountingClient(t)
	c := llm.New(agent.Config{BaseURL: s.URL(), Model: "m", IdleTimeout: guard}, hc)
	got, err := collect(testCtx(t), c, userMsgs("hi"))
	tooLarge(t, err, "llm.max_line_bytes")
	if len(got) != 0 {
		t.Errorf("%d deltas handed on, want none", len(got))
	}
	checkRead(t, read, agent.DefaultMaxLineBytes)
}

func TestStreamLineWithoutEnd(t *testing.T) {
	s := startLLM(t, fakellm.Script(
		fakellm.Reply{Flood: &fakellm.Flood{Head: "data: {", Fill: "x", Size: 8 << 20}},
		fakellm.Reply{Flood: &fakellm.Flood{Head: "data: {", Fill: "x", Size: 8 << 20}},
	))
	hc, read := fakellmtest.CountingClient(t)
	c := llm.New(agent.Config{BaseURL: s.URL(), Model: "m", IdleTimeout: guard}, hc)
	_, err := collect(testCtx(t), c, userMsgs("hi"))
	tooLarge(t, err, "llm.max_line_bytes")
	checkRead(t, read, agent.DefaultMaxLineBytes)

	// The key sets the limit.
	const limit = 64 << 10
	read.Store(0)
	c = llm.New(agent.Config{BaseURL: s.URL(), Model: "m", IdleTimeout: guard, MaxLineBytes: limit}, hc)
	_, err = collect(testCtx(t), c, userMsgs("hi"))
	if le := tooLarge(t, err, "llm.max_line_bytes"); !strings.Contains(le.Detail, "64 KB") {
		t.Errorf("detail %q does not give the limit", le.Detail)
	}
	checkRead(t, read, limit)
}

func TestStreamStrayLines(t *testing.T) {
	// Events, each followed by a long comment line: go-openai keeps every
	// line that is not an event, for the whole stream.
	event := eventHead + `a"}}]}` + "\n\n"
	comment := ": " + strings.Repeat("p", 16<<10) + "\n"
	s := startLLM(t, fakellm.Script(fakellm.Reply{Flood: &fakellm.Flood{Fill: event + comment, Size: 8 << 20}}))
	hc, read := fakellmtest.CountingClient(t)
	c := llm.New(agent.Config{BaseURL: s.URL(), Model: "m", IdleTimeout: guard}, hc)
	_, err := collect(testCtx(t), c, userMsgs("hi"))
	tooLarge(t, err, "llm.max_line_bytes")
	// The events in between are read too: about a hundredth more.
	checkRead(t, read, agent.DefaultMaxLineBytes+agent.DefaultMaxLineBytes/50)
}

func TestStreamHugeDelta(t *testing.T) {
	big := strings.Repeat("word ", 20<<10) // 100 KiB, a fraction of the line limit
	s := startLLM(t, fakellm.Script(
		fakellm.Reply{Tokens: []string{"Hello ", big, "there"}},
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "python", Arguments: `{"code":"` + strings.Repeat("1+", 150<<10) + `1"}`}}},
	))
	// The reply limit alone would let the delta through.
	c := clientFor(s, func(c *agent.Config) { c.MaxReplyTokens = 1 << 20 })
	got, err := collect(testCtx(t), c, userMsgs("hi"))
	tooLarge(t, err, "llm.max_delta_bytes")
	if strings.Join(got, "") != "Hello " {
		t.Errorf("deltas %d bytes, want only the one before the huge one", len(strings.Join(got, "")))
	}
	_, err = c.Stream(testCtx(t), userMsgs("hi"), func(string) {})
	tooLarge(t, err, "llm.max_delta_bytes")
}

func TestStreamDeltaLimitSetting(t *testing.T) {
	mid := strings.Repeat("word ", 400) // 2,000 bytes
	s := startLLM(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: []string{mid}} })
	if got, err := collect(testCtx(t), clientFor(s), userMsgs("hi")); err != nil || len(got) != 1 {
		t.Fatalf("with the default: %d deltas, %v", len(got), err)
	}
	_, err := collect(testCtx(t), clientFor(s, func(c *agent.Config) { c.MaxDeltaBytes = 1024 }), userMsgs("hi"))
	if le := tooLarge(t, err, "llm.max_delta_bytes"); !strings.Contains(le.Detail, "1 KB") {
		t.Errorf("detail %q does not give the limit", le.Detail)
	}
}

func TestStreamHugeErrorBody(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Flood: &fakellm.Flood{
		Status: http.StatusInternalServerError, ContentType: "text/html", Head: "<html><body>", Fill: "Internal error. ", Size: 5 << 20,
	}}))
	hc, read := fakellmtest.CountingClient(t)
	c := llm.New(agent.Config{BaseURL: s.URL(), Model: "m", IdleTimeout: guard}, hc)
	_, err := collect(testCtx(t), c, userMsgs("hi"))
	le := llmError(t, err)
	if le.Kind != agent.KindServer || le.Status != http.StatusInternalServerError {
		t.Errorf("kind %v status %d, want KindServer 500", le.Kind, le.Status)
	}
	msg := err.Error()
	if len(msg) > 600 || !strings.Contains(msg, "llm.max_error_bytes") || !strings.Contains(msg, "Internal error.") {
		t.Errorf("error of %d bytes, want a short one quoting the page and naming llm.max_error_bytes: %.700s", len(msg), msg)
	}
	checkRead(t, read, agent.DefaultMaxErrorBytes)
}

func TestLongErrorMessage(t *testing.T) {
	// An OpenAI-style error within the error limit, with a long message.
	long := strings.Repeat("too long ", 400)
	s := startLLM(t, fakellm.Script(fakellm.Reply{Status: http.StatusBadRequest, ErrorMessage: long}))
	_, err := collect(testCtx(t), clientFor(s), userMsgs("hi"))
	le := llmError(t, err)
	if le.Kind != agent.KindBadRequest || !strings.HasPrefix(le.Detail, "too long too long") || len(le.Detail) > 400 {
		t.Errorf("kind %v, detail of %d bytes %.80q…; want the message's start", le.Kind, len(le.Detail), le.Detail)
	}
}

func TestStreamErrorEventMessageShortened(t *testing.T) {
	body := `data: {"error":{"message":"` + strings.Repeat("overloaded ", 20000) + `","type":"server_error"}}` + "\n\n"
	s := startLLM(t, fakellm.Script(fakellm.Reply{Body: body, ContentType: "text/event-stream"}))
	_, err := collect(testCtx(t), clientFor(s), userMsgs("hi"))
	if msg := err.Error(); len(msg) > 600 || !strings.Contains(msg, "overloaded") {
		t.Errorf("error of %d bytes, want the start of the server's message: %.700s", len(msg), msg)
	}
}

func TestCompleteHugeAnswer(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Flood: &fakellm.Flood{
		ContentType: "application/json", Head: `{"choices":[{"index":0,"message":{"role":"assistant","content":"`, Fill: "a", Size: 16 << 20, Tail: `"}}]}`,
	}}))
	hc, read := fakellmtest.CountingClient(t)
	c := llm.New(agent.Config{BaseURL: s.URL(), Model: "m", IdleTimeout: guard}, hc)
	_, _, err := c.Complete(testCtx(t), userMsgs("sum up"))
	tooLarge(t, err, "llm.max_response_bytes")
	checkRead(t, read, agent.DefaultMaxResponseBytes)
}

func TestEmbedHugeAnswers(t *testing.T) {
	s := startLLM(t, nil)
	floods := []*fakellm.Flood{
		{ContentType: "application/json", Head: `{"data":[{"index":0,"embedding":[`, Fill: "0.5,", Size: 64 << 20},
		{Status: http.StatusBadGateway, ContentType: "text/html", Fill: "Bad gateway. ", Size: 5 << 20},
	}
	var n atomic.Int32
	s.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply {
		return fakellm.EmbeddingReply{Flood: floods[n.Add(1)-1]}
	})
	hc, read := fakellmtest.CountingClient(t)
	e := llm.NewEmbedder(llm.EmbeddingsConfig{BaseURL: s.URL(), Model: "m"}, hc)
	_, err := e.Embed(testCtx(t), []string{"a"})
	var ee *llm.EmbedError
	if !errors.As(err, &ee) || ee.Kind != agent.KindTooLarge || !strings.Contains(err.Error(), "embeddings.max_response_bytes") {
		t.Fatalf("huge answer: %v, want KindTooLarge naming embeddings.max_response_bytes", err)
	}
	checkRead(t, read, llm.DefaultEmbedMaxResponseBytes)

	read.Store(0)
	_, err = e.Embed(testCtx(t), []string{"a"})
	if !errors.As(err, &ee) || ee.Status != http.StatusBadGateway || len(err.Error()) > 600 || !strings.Contains(err.Error(), "embeddings.max_error_bytes") {
		t.Fatalf("huge error: %.700v; want a short HTTP 502 error naming embeddings.max_error_bytes", err)
	}
	checkRead(t, read, agent.DefaultMaxErrorBytes)
}
