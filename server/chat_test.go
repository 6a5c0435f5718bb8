package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"koe/app"
	"koe/bolt"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/fakellm"
)

// sse is one chat API stream read by the tests: events as they come,
// with a deadline so that a missing event fails instead of hanging.
type sse struct {
	t    *testing.T
	resp *http.Response
	r    *bufio.Reader
	// raw is every line read, for the golden trace.
	raw []string
}

type chatEvent struct {
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
}

func (e chatEvent) text() string {
	var s string
	_ = json.Unmarshal(e.Content, &s)
	return s
}

func (e chatEvent) status() protocol.StatusBody {
	var s protocol.StatusBody
	_ = json.Unmarshal(e.Content, &s)
	return s
}

func (e chatEvent) message() protocol.ChatMessage {
	var m protocol.ChatMessage
	_ = json.Unmarshal(e.Content, &m)
	return m
}

func postJSON(t *testing.T, url string, body any) *http.Response {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// openStream starts POST /api/chat/stream and checks it is an event stream.
func openStream(t *testing.T, addr string, body any) *sse {
	t.Helper()
	resp := postJSON(t, "http://"+addr+"/api/chat/stream", body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sse{t: t, resp: resp, r: bufio.NewReader(resp.Body)}
}

// next returns the next event; a hang guard fails the test.
func (s *sse) next() chatEvent {
	s.t.Helper()
	type result struct {
		ev  chatEvent
		err error
	}
	got := make(chan result, 1)
	go func() {
		for {
			line, err := s.r.ReadString('\n')
			if err != nil {
				got <- result{err: err}
				return
			}
			line = strings.TrimRight(line, "\n")
			s.raw = append(s.raw, line)
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue // blank separators, heartbeat comments
			}
			var ev chatEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				got <- result{err: fmt.Errorf("event %q: %w", data, err)}
				return
			}
			got <- result{ev: ev}
			return
		}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			s.t.Fatalf("reading the stream: %v", r.err)
		}
		return r.ev
	case <-time.After(30 * time.Second):
		s.t.Fatal("no event within 30 s")
	}
	return chatEvent{}
}

// all reads events up to and including end, and checks nothing follows.
func (s *sse) all() []chatEvent {
	s.t.Helper()
	var out []chatEvent
	for {
		ev := s.next()
		out = append(out, ev)
		if ev.Type == protocol.EventEnd {
			break
		}
	}
	rest, err := io.ReadAll(s.r)
	if err != nil || strings.TrimSpace(string(rest)) != "" {
		s.t.Fatalf("after end: %q, %v", rest, err)
	}
	return out
}

// until reads events until one satisfies stop, and returns them all.
func (s *sse) until(stop func(chatEvent) bool) []chatEvent {
	s.t.Helper()
	var out []chatEvent
	for {
		ev := s.next()
		out = append(out, ev)
		if stop(ev) {
			return out
		}
		if ev.Type == protocol.EventEnd {
			s.t.Fatalf("the stream ended first: %v", describe(out))
		}
	}
}

// describe is events as short strings, for sequence assertions.
func describe(evs []chatEvent) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		switch ev.Type {
		case protocol.EventToken:
			out = append(out, "token")
		case protocol.EventStatus:
			st := ev.status()
			out = append(out, "status "+st.TaskID+" "+st.State)
		case protocol.EventMessage:
			m := ev.message()
			d := "message " + m.Type
			if len(m.ToolCalls) > 0 {
				d += " tool_calls"
			}
			if m.AdditionalKwargs.Interrupted {
				d += " interrupted"
			}
			out = append(out, d)
		default:
			out = append(out, ev.Type)
		}
	}
	return slices.Compact(out) // token runs read as one
}

func tokensOf(evs []chatEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == protocol.EventToken {
			b.WriteString(ev.text())
		}
	}
	return b.String()
}

func messagesOf(evs []chatEvent, typ string) []protocol.ChatMessage {
	var out []protocol.ChatMessage
	for _, ev := range evs {
		if ev.Type == protocol.EventMessage && ev.message().Type == typ {
			out = append(out, ev.message())
		}
	}
	return out
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

func waitDisconnect(t *testing.T, llm *fakellm.Server, why string) {
	t.Helper()
	select {
	case <-llm.Disconnects():
	case <-time.After(30 * time.Second):
		t.Fatalf("the LLM stream was not closed: %s", why)
	}
}

// TestChatStreamPlainTurn: the exact events of a plain turn, recorded as
// a golden trace; the history it made holds the turn.
func TestChatStreamPlainTurn(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Hello there. How are you?")}))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	s := openStream(t, m.Addr(), protocol.ChatRequest{Message: "hi"})
	evs := s.all()
	want := []string{"message human", "status llm:1 start", "token", "status llm:1 end", "message ai", "end"}
	if got := describe(evs); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if got := tokensOf(evs); got != "Hello there. How are you?" {
		t.Errorf("tokens join to %q", got)
	}
	human, answer := messagesOf(evs, "human")[0], messagesOf(evs, "ai")[0]
	uid := human.AdditionalKwargs.HistoryUID
	if uid == "" || human.Content != "hi" || answer.AdditionalKwargs.HistoryUID != uid || human.RunID == "" || answer.RunID != human.RunID {
		t.Errorf("human %+v, answer %+v", human, answer)
	}
	meta := answer.ResponseMetadata
	if answer.Content != "Hello there. How are you?" || meta.FinishReason != "stop" || meta.ModelName != fakellm.ModelID ||
		meta.TokenUsage == nil || meta.TokenUsage.CompletionTokens == 0 || meta.TokenUsage.TotalTokens != meta.TokenUsage.PromptTokens+meta.TokenUsage.CompletionTokens {
		t.Errorf("answer %+v, metadata %+v", answer, meta)
	}
	golden(t, "chat_plain.sse", normalise(s.raw))

	var h protocol.ChatHistory
	if code := getJSON(t, "http://"+m.Addr()+"/api/histories/"+human.AdditionalKwargs.ConfUID+"/"+uid, &h); code != 200 {
		t.Fatalf("history: %d", code)
	}
	if len(h.Messages) != 2 || h.Messages[0].Content != "hi" || h.Messages[1].Content != answer.Content || h.Messages[1].AdditionalKwargs.ID == 0 {
		t.Errorf("history %+v", h)
	}
	var list protocol.HistoryList
	if code := getJSON(t, "http://"+m.Addr()+"/api/histories/"+human.AdditionalKwargs.ConfUID, &list); code != 200 || len(list.Histories) != 1 || list.Histories[0].UID != uid {
		t.Errorf("histories: %d %+v", code, list)
	}
}

// TestChatStreamToolTurn: a turn whose model calls the calculator streams
// the call, its status and result, and the answer of the second LLM call.
func TestChatStreamToolTurn(t *testing.T) {
	llm := startLLM(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("Let me check."), ToolCalls: []fakellm.ToolCall{
			{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6 * 7"}`},
		}},
		fakellm.Reply{Tokens: fakellm.Words("Six times seven is 42.")},
	))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.Tools.Enabled = []string{"calculator"}
	m := startKoe(t, cfg)
	s := openStream(t, m.Addr(), protocol.ChatRequest{Message: "What is six times seven?"})
	evs := s.all()
	want := []string{
		"message human", "status llm:1 start", "token", "status llm:1 end", "message ai tool_calls",
		"status tool:call_1 start", "status tool:call_1 end", "message tool",
		"status llm:2 start", "token", "status llm:2 end", "message ai", "end",
	}
	if got := describe(evs); !slices.Equal(got, want) {
		t.Fatalf("events %q\nwant %q", got, want)
	}
	call := messagesOf(evs, "ai")[0]
	if call.Content != "Let me check." || call.ToolCalls[0].Name != "calculator" || string(call.ToolCalls[0].Args) != `{"expression":"6 * 7"}` ||
		call.ResponseMetadata.FinishReason != "tool_calls" {
		t.Errorf("tool call message %+v", call)
	}
	result := messagesOf(evs, "tool")[0]
	if result.Content != "42" || result.ToolCallID != "call_1" || result.Status != "success" {
		t.Errorf("tool message %+v", result)
	}
	if answer := messagesOf(evs, "ai")[1]; answer.Content != "Six times seven is 42." {
		t.Errorf("answer %+v", answer)
	}
	golden(t, "chat_tool.sse", normalise(s.raw))
}

// TestChatStreamLLMError: a failing LLM is an error event a person can act
// on, then end; the history keeps the question.
func TestChatStreamLLMError(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Status: 500, ErrorMessage: "model crashed"}))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	evs := openStream(t, m.Addr(), protocol.ChatRequest{Message: "hi"}).all()
	want := []string{"message human", "status llm:1 start", "status llm:1 error", "error", "end"}
	if got := describe(evs); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if msg := evs[3].text(); !strings.Contains(msg, "model crashed") || !strings.Contains(msg, llm.URL()) {
		t.Errorf("error %q: it should quote the server and say where it is", msg)
	}
	if st := evs[2].status(); !strings.Contains(st.ErrorDetails, "model crashed") {
		t.Errorf("failed status %+v", st)
	}
}

// TestChatStreamClientLeaves: a client that goes away mid-reply stops the
// turn (the LLM sees its stream closed); what was said is stored,
// interrupted.
func TestChatStreamClientLeaves(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("word ", 300)), Interval: 20 * time.Millisecond}))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	s := openStream(t, m.Addr(), protocol.ChatRequest{Message: "talk"})
	human := s.next().message()
	s.until(func(ev chatEvent) bool { return ev.Type == protocol.EventToken })
	s.resp.Body.Close()
	waitDisconnect(t, llm, "the client left")
	h := waitHistory(t, m.Addr(), human.AdditionalKwargs.ConfUID, human.AdditionalKwargs.HistoryUID, 2)
	if ai := h.Messages[1]; ai.Type != "ai" || !ai.AdditionalKwargs.Interrupted || !strings.HasPrefix(ai.Content, "word") {
		t.Errorf("stored reply %+v", ai)
	}
}

// waitHistory reads a history until it holds n messages: a turn stores its
// reply as it ends, which a test sees only from outside.
func waitHistory(t *testing.T, addr, conf, uid string, n int) protocol.ChatHistory {
	t.Helper()
	return testkit.Await(t, fmt.Sprintf("the history holds %d messages", n), func() (protocol.ChatHistory, bool) {
		var h protocol.ChatHistory
		getJSON(t, "http://"+addr+"/api/histories/"+conf+"/"+uid, &h)
		return h, len(h.Messages) >= n
	})
}

// TestChatStop: a stop request from another connection ends the turn at
// once; its stream says so and ends. A second stop finds nothing.
func TestChatStop(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("word ", 300)), Interval: 20 * time.Millisecond}))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	s := openStream(t, m.Addr(), protocol.ChatRequest{Message: "talk"})
	uid := s.next().message().AdditionalKwargs.HistoryUID
	s.until(func(ev chatEvent) bool { return ev.Type == protocol.EventToken })
	resp := postJSON(t, "http://"+m.Addr()+"/api/chat/"+uid+"/stop", nil)
	var res protocol.StopResult
	_ = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if resp.StatusCode != 200 || !res.Stopped || res.HistoryUID != uid {
		t.Fatalf("stop: %d %+v", resp.StatusCode, res)
	}
	waitDisconnect(t, llm, "stopped")
	rest := describe(s.all())
	if rest[len(rest)-2] != "message ai interrupted" || rest[len(rest)-1] != "end" {
		t.Errorf("after stop: %q", rest)
	}
	resp = postJSON(t, "http://"+m.Addr()+"/api/chat/"+uid+"/stop", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("second stop: %d, want 404", resp.StatusCode)
	}
}

// TestChatStopsWebSocketTurn: the stop endpoint stops a WebSocket client's
// turn too; that client is told to stop playing.
func TestChatStopsWebSocketTurn(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("word ", 300)), Interval: 20 * time.Millisecond}))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	c := dialKoe(t, m.Addr())
	c.send(msg{"type": "text-input", "text": "talk", "images": []any{}})
	var uid string
	c.until(func(f msg) bool {
		if f.typ() == "message" {
			uid = f["content"].(map[string]any)["additional_kwargs"].(map[string]any)["history_uid"].(string)
		}
		return f.typ() == "token"
	})
	resp := postJSON(t, "http://"+m.Addr()+"/api/chat/"+uid+"/stop", nil)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stop: %d", resp.StatusCode)
	}
	waitDisconnect(t, llm, "stopped over HTTP")
	c.until(isControl("interrupt"))
	c.alive()
}

// TestChatHistoryAcrossTransports: a history started over the chat API
// continues over the WebSocket, and a WebSocket session whose history
// was talked in over the chat API since sees those turns too.
func TestChatHistoryAcrossTransports(t *testing.T) {
	llm := startLLM(t, func(r fakellm.Request) fakellm.Reply {
		// The character's prompt rides above the user's words.
		lines := strings.Split(r.Messages[len(r.Messages)-1].Content, "\n")
		return fakellm.Reply{Tokens: fakellm.Words("You said: " + lines[len(lines)-1] + ".")}
	})
	cfg := testConfig(t, t.TempDir(), llm.URL())
	// No summary: one made in the background after the third turn may or
	// may not be ready for the fourth, which would then see the turns
	// summarised rather than as they were said.
	cfg.Character.Memory.Every = 100
	m := startKoe(t, cfg)
	uid := messagesOf(openStream(t, m.Addr(), protocol.ChatRequest{Message: "the door is blue"}).all(), "human")[0].AdditionalKwargs.HistoryUID

	c := dialKoe(t, m.Addr())
	c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")
	c.turn("what colour is the door?")
	reqs := chatRequests(llm)
	if ctx := contentOf(reqs[len(reqs)-1]); !strings.Contains(ctx, "user: the door is blue\nassistant: You said: the door is blue.\n") {
		t.Fatalf("the WebSocket turn does not see the chat API's:\n%s", ctx)
	}

	// The same history, now over the chat API while the WebSocket session
	// is still in it, then over the WebSocket again.
	openStream(t, m.Addr(), protocol.ChatRequest{Message: "the cat is grey", HistoryUID: uid}).all()
	c.turn("and the cat?")
	reqs = chatRequests(llm)
	if ctx := contentOf(reqs[len(reqs)-1]); !strings.Contains(ctx, "user: the cat is grey\nassistant: You said: the cat is grey.\nuser: ") || !strings.HasSuffix(ctx, "and the cat?\n") {
		t.Fatalf("the WebSocket session's memory missed the chat API's turn:\n%s", ctx)
	}
}

// TestChatSecondStreamTakesOver: a second stream on the same history
// stops the first, which ends with what it had.
func TestChatSecondStreamTakesOver(t *testing.T) {
	llm := startLLM(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("First.")},
		fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("slow ", 300)), Interval: 20 * time.Millisecond},
		fakellm.Reply{Tokens: fakellm.Words("Second.")},
	))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	uid := messagesOf(openStream(t, m.Addr(), protocol.ChatRequest{Message: "one"}).all(), "human")[0].AdditionalKwargs.HistoryUID
	first := openStream(t, m.Addr(), protocol.ChatRequest{Message: "two", HistoryUID: uid})
	first.until(func(ev chatEvent) bool { return ev.Type == protocol.EventToken })
	second := openStream(t, m.Addr(), protocol.ChatRequest{Message: "three", HistoryUID: uid})
	rest := describe(first.all())
	if rest[len(rest)-2] != "message ai interrupted" {
		t.Errorf("the first stream after the second began: %q", rest)
	}
	if got := describe(second.all()); got[len(got)-2] != "message ai" {
		t.Errorf("second stream: %q", got)
	}
	h := waitHistory(t, m.Addr(), koeConf(t), uid, 6)
	var roles []string
	for _, msg := range h.Messages {
		roles = append(roles, fmt.Sprintf("%s:%s:%v", msg.Type, strings.Fields(msg.Content + " -")[0], msg.AdditionalKwargs.Interrupted))
	}
	if want := []string{"human:one:false", "ai:First.:false", "human:two:false", "ai:slow:true", "human:three:false", "ai:Second.:false"}; !slices.Equal(roles, want) {
		t.Errorf("history %q, want %q", roles, want)
	}
}

// koeConf is the default character's conf_uid.
func koeConf(t *testing.T) string { return testConfig(t, t.TempDir(), "").Character.ConfUID }

// TestChatInvoke answers with the final message alone.
func TestChatInvoke(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Fine, thanks.")}))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	resp := postJSON(t, "http://"+m.Addr()+"/api/chat/invoke", protocol.ChatRequest{Message: "how are you?"})
	defer resp.Body.Close()
	var answer protocol.ChatMessage
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != 200 {
		t.Fatalf("invoke: %d %v", resp.StatusCode, err)
	}
	if answer.Type != "ai" || answer.Content != "Fine, thanks." || answer.AdditionalKwargs.HistoryUID == "" || answer.ResponseMetadata.FinishReason != "stop" {
		t.Errorf("answer %+v", answer)
	}

	failing := startLLM(t, fakellm.Script(fakellm.Reply{Status: 500, ErrorMessage: "model crashed"}))
	m2 := startKoe(t, testConfig(t, t.TempDir(), failing.URL()))
	resp2 := postJSON(t, "http://"+m2.Addr()+"/api/chat/invoke", protocol.ChatRequest{Message: "hi"})
	defer resp2.Body.Close()
	var e struct{ Error string }
	_ = json.NewDecoder(resp2.Body).Decode(&e)
	if resp2.StatusCode != http.StatusBadGateway || !strings.Contains(e.Error, "model crashed") {
		t.Errorf("failing LLM: %d %q", resp2.StatusCode, e.Error)
	}
}

// TestChatBadRequests: every refusal is an HTTP status with a JSON error,
// before any stream starts; the server keeps working.
func TestChatBadRequests(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Still here.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.MaxMessageBytes = 1 << 20
	m := startKoe(t, cfg)
	url := "http://" + m.Addr() + "/api/chat/stream"
	cases := []struct {
		name, ctype, body string
		status            int
		says              string
	}{
		{"not JSON", "application/json", "{", 400, "invalid JSON"},
		{"wrong type", "text/plain", `{"message":"hi"}`, 415, "JSON body"},
		{"empty", "application/json", `{"message":"  "}`, 400, `"message" is empty`},
		{"unknown history", "application/json", `{"message":"hi","history_uid":"2025-01-01_00-00-00_00000000000000000000000000000000"}`, 404, "no such history"},
		{"bad history id", "application/json", `{"message":"hi","history_uid":"../../etc"}`, 400, "not valid"},
		{"unknown character", "application/json", `{"message":"hi","conf_uid":"nobody"}`, 404, "nobody"},
		{"bad rate", "application/json", `{"message":"hi","compression_rate":0.9}`, 400, "compression rate"},
		{"too big", "application/json", `{"message":"` + strings.Repeat("x", 2<<20) + `"}`, 413, "Too Large"},
		{"bad image", "application/json", `{"message":"hi","images":[{"source":"upload","data":"data:image/png;base64,AAAA","mime_type":"image/png"}]}`, 400, "image"},
	}
	for _, c := range cases {
		resp, err := http.Post(url, c.ctype, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s: %d %q, want %d saying %q", c.name, resp.StatusCode, e.Error, c.status, c.says)
		}
	}
	if got := describe(openStream(t, m.Addr(), protocol.ChatRequest{Message: "hi"}).all()); got[len(got)-2] != "message ai" {
		t.Errorf("after the refusals: %q", got)
	}
}

// TestChatNeedsToken: the chat API is behind the same token as the rest.
func TestChatNeedsToken(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Hi.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = "s3cret-token-for-tests"
	m := startKoe(t, cfg)
	resp := postJSON(t, "http://"+m.Addr()+"/api/chat/stream", protocol.ChatRequest{Message: "hi"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://"+m.Addr()+"/api/chat/invoke", strings.NewReader(`{"message":"hi"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer s3cret-token-for-tests")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("with the token: %d", resp.StatusCode)
	}
}

// TestChatStreamStartsBeforeTheLLM: the response starts at once, before
// the LLM has said anything.
func TestChatStreamStartsBeforeTheLLM(t *testing.T) {
	release := make(chan struct{})
	llm := startLLM(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"Done."}, BeforeChunk: func(int) { <-release }}
	})
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	conn, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"message":"hi"}`
	fmt.Fprintf(conn, "POST /api/chat/stream HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", m.Addr(), len(body), body)
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("status line %q, %v", status, err)
	}
	close(release)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"type":"end"`) {
			break
		}
	}
}

// TestChatStreamHeartbeat: a stream whose LLM says nothing for a while
// carries comment lines meanwhile.
func TestChatStreamHeartbeat(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Hang: true}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.SSEHeartbeat = 20 * time.Millisecond
	cfg.Character.LLM.IdleTimeout = time.Hour
	m := startKoe(t, cfg)
	s := openStream(t, m.Addr(), protocol.ChatRequest{Message: "hi"})
	uid := s.next().message().AdditionalKwargs.HistoryUID
	s.next() // llm:1 start
	// Read raw lines until two heartbeats have come.
	beats := 0
	for beats < 2 {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, ":") {
			beats++
		} else if strings.TrimSpace(line) != "" {
			t.Fatalf("unexpected line while the LLM says nothing: %q", line)
		}
	}
	resp := postJSON(t, "http://"+m.Addr()+"/api/chat/"+uid+"/stop", nil)
	resp.Body.Close()
	if got := describe(s.all()); got[len(got)-1] != "end" {
		t.Errorf("after stop: %q", got)
	}
}

// TestShutdownEndsChatStreams: shutting down ends a running stream with
// an error event and end, and stores what was said.
func TestShutdownEndsChatStreams(t *testing.T) {
	ctx := t.Context()
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("long ", 500)), Interval: 10 * time.Millisecond}))
	dir := t.TempDir()
	cfg := testConfig(t, dir, llm.URL())
	m := startKoe(t, cfg)
	s := openStream(t, m.Addr(), protocol.ChatRequest{Message: "keep talking"})
	s.until(func(ev chatEvent) bool { return ev.Type == protocol.EventToken })
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	got := describe(s.all())
	if n := len(got); n < 3 || got[n-3] != "message ai interrupted" || got[n-2] != "error" || got[n-1] != "end" {
		t.Errorf("stream at shutdown: %q", got)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	store, err := bolt.Open(filepath.Join(dir, app.DatabaseFile), bolt.Options{})
	if err != nil {
		t.Fatalf("database not released: %v", err)
	}
	defer store.Close()
	list, err := store.List(ctx, cfg.Character.ConfUID)
	if err != nil || len(list) != 1 || !list[0].LatestMessage.Interrupted || !strings.HasPrefix(list[0].LatestMessage.Content, "long") {
		t.Fatalf("stored: %+v, %v", list, err)
	}
}

// TestChatStreamSlowReader: a client that stops reading is dropped once
// its queue has stayed full for server.write_timeout; its turn stops and
// everyone else goes on.
func TestChatStreamSlowReader(t *testing.T) {
	llm := startLLM(t, func(r fakellm.Request) fakellm.Reply {
		if strings.Contains(contentOf(r), "flood") {
			// Big tokens fill the socket's buffers in few events.
			return fakellm.Reply{Tokens: []string{strings.Repeat("lorem ipsum dolor sit amet ", 100)}, Endless: true}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Still here.")}
	})
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.SendQueueSize = 8
	cfg.Server.WriteTimeout = 200 * time.Millisecond
	cfg.Character.LLM.MaxReplyTokens = 1 << 30
	m := startKoe(t, cfg)
	// A small receive window, so that koe's side fills soon.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"message":"flood"}`
	fmt.Fprintf(conn, "POST /api/chat/stream HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", m.Addr(), len(body), body)
	// Never read.
	waitDisconnect(t, llm, "the client stopped reading")
	if got := describe(openStream(t, m.Addr(), protocol.ChatRequest{Message: "hi"}).all()); got[len(got)-2] != "message ai" {
		t.Errorf("another client afterwards: %q", got)
	}
}
