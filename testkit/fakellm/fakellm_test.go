package fakellm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"koe/testkit"
)

// guard bounds every wait in these tests; it is a safety net against
// hangs on a loaded machine, not a speed assertion.
const guard = 30 * time.Second

func start(t *testing.T, respond func(Request) Reply) (*Server, *openai.Client) {
	t.Helper()
	s, err := Start("127.0.0.1:0", respond)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	cfg := openai.DefaultConfig("key")
	cfg.BaseURL = s.URL()
	return s, openai.NewClientWithConfig(cfg)
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

func userReq(text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    "some-model",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
	}
}

// cancelInFlight runs call and cancels it while s serves it (with hang,
// once s has sent the headers of its hanging answer): the client gets
// context.Canceled and s sees it leave.
func cancelInFlight(t *testing.T, s *Server, hang bool, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- call(ctx) }()
	if !s.WaitActive(guard) {
		t.Fatal("the request never reached the server")
	}
	if hang {
		// Cancel once the headers are sent: the client then waits for
		// a body that never comes.
		testkit.Eventually(t, "the hang sent its headers", func() bool { return s.Hanging() > 0 })
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("hang %v: client err = %v", hang, err)
	}
	waitDisconnect(t, s)
	waitIdle(t, s)
}

func waitDisconnect(t *testing.T, s *Server) {
	t.Helper()
	select {
	case <-s.Disconnects():
	case <-time.After(guard):
		t.Fatal("no disconnect reported (hang guard)")
	}
}

// closeWhileHanging closes s while a request of kind what hangs in it, and
// checks that Close returns and does not count the shutdown as a client
// disconnect.
func closeWhileHanging(t *testing.T, s *Server, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(guard):
		t.Fatalf("Close did not return with a hanging %s request", what)
	}
	select {
	case <-s.Disconnects():
		t.Error("server shutdown reported as client disconnect")
	default:
	}
}

func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	testkit.Eventually(t, "no request is active", func() bool { return s.Active() == 0 })
}

func TestStreamConcatenation(t *testing.T) {
	tokens := Words("Hello there, how are you today?")
	s, c := start(t, Script(Reply{Tokens: tokens}))
	req := userReq("hi")
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	st, err := c.CreateChatCompletionStream(testCtx(t), req)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	defer st.Close()

	var got []string
	var roles []string
	var finish openai.FinishReason
	var usage *openai.Usage
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if !strings.HasPrefix(resp.ID, "chatcmpl-fake-") || resp.Object != "chat.completion.chunk" || resp.Model != "some-model" {
			t.Errorf("unexpected chunk envelope: id=%q object=%q model=%q", resp.ID, resp.Object, resp.Model)
		}
		if resp.Usage != nil {
			usage = resp.Usage
		}
		for _, ch := range resp.Choices {
			if ch.Delta.Content != "" {
				got = append(got, ch.Delta.Content)
			}
			if ch.Delta.Role != "" {
				roles = append(roles, ch.Delta.Role)
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if strings.Join(got, "") != strings.Join(tokens, "") || len(got) != len(tokens) {
		t.Errorf("deltas = %q, want %q", got, tokens)
	}
	if len(roles) != 1 || roles[0] != openai.ChatMessageRoleAssistant {
		t.Errorf("roles = %q, want exactly one assistant", roles)
	}
	if finish != openai.FinishReasonStop {
		t.Errorf("finish = %q, want stop", finish)
	}
	if usage == nil || usage.CompletionTokens != len(tokens) || usage.TotalTokens != usage.PromptTokens+usage.CompletionTokens {
		t.Errorf("usage = %+v, want completion=%d", usage, len(tokens))
	}
	waitIdle(t, s)
	select {
	case <-s.Disconnects():
		t.Error("completed stream reported as a disconnect")
	default:
	}
}

func TestStreamWithoutUsage(t *testing.T) {
	_, c := start(t, Script(Reply{Tokens: []string{"a", "b"}}))
	st, err := c.CreateChatCompletionStream(testCtx(t), userReq("hi"))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	defer st.Close()
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if resp.Usage != nil {
			t.Errorf("usage sent without stream_options.include_usage: %+v", resp.Usage)
		}
	}
}

func TestNonStream(t *testing.T) {
	tokens := Words("Plain old answer.")
	_, c := start(t, Script(Reply{Tokens: tokens, Interval: time.Millisecond}))
	resp, err := c.CreateChatCompletion(testCtx(t), userReq("12345678"))
	if err != nil {
		t.Fatalf("CreateChatCompletion: %v", err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices = %d", len(resp.Choices))
	}
	m := resp.Choices[0].Message
	if m.Role != openai.ChatMessageRoleAssistant || m.Content != "Plain old answer." {
		t.Errorf("message = %+v", m)
	}
	if resp.Choices[0].FinishReason != openai.FinishReasonStop {
		t.Errorf("finish = %q", resp.Choices[0].FinishReason)
	}
	if resp.Model != "some-model" || resp.Object != "chat.completion" {
		t.Errorf("model=%q object=%q", resp.Model, resp.Object)
	}
	want := openai.Usage{PromptTokens: 2, CompletionTokens: len(tokens), TotalTokens: 2 + len(tokens)}
	if resp.Usage.PromptTokens != want.PromptTokens || resp.Usage.CompletionTokens != want.CompletionTokens || resp.Usage.TotalTokens != want.TotalTokens {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
}

func TestErrorStatuses(t *testing.T) {
	for _, status := range []int{401, 429, 500} {
		for _, stream := range []bool{false, true} {
			msg := "boom " + http.StatusText(status)
			_, c := start(t, Script(Reply{Status: status, ErrorMessage: msg, Tokens: []string{"never"}}))
			var err error
			if stream {
				var st *openai.ChatCompletionStream
				st, err = c.CreateChatCompletionStream(testCtx(t), userReq("hi"))
				if st != nil {
					st.Close()
				}
			} else {
				_, err = c.CreateChatCompletion(testCtx(t), userReq("hi"))
			}
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) {
				t.Errorf("status %d stream=%v: err = %v (%T), want *openai.APIError", status, stream, err, err)
				continue
			}
			if apiErr.HTTPStatusCode != status || apiErr.Message != msg || apiErr.Type == "" {
				t.Errorf("status %d stream=%v: got %+v", status, stream, apiErr)
			}
		}
	}
}

func TestInvalidStatusDoesNotPanic(t *testing.T) {
	for _, status := range []int{-1, 42, 150, 1000} {
		_, c := start(t, Script(Reply{Status: status}))
		_, err := c.CreateChatCompletion(testCtx(t), userReq("hi"))
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 {
			t.Errorf("status %d: err = %v, want APIError 500", status, err)
		}
	}
}

func TestBreakAfter(t *testing.T) {
	for _, tc := range []struct{ tokens, breakAfter, want int }{
		{5, 2, 2},
		{5, 1, 1},
		{3, 3, 3}, // break after the last token: still no [DONE]
		{3, 9, 3},
	} {
		tokens := make([]string, tc.tokens)
		for i := range tokens {
			tokens[i] = "t"
		}
		_, c := start(t, Script(Reply{Tokens: tokens, BreakAfter: tc.breakAfter}))
		st, err := c.CreateChatCompletionStream(testCtx(t), userReq("hi"))
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		got := 0
		for {
			resp, err := st.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					t.Errorf("%+v: got io.EOF, want a broken-stream error", tc)
				}
				break
			}
			for _, ch := range resp.Choices {
				if ch.Delta.Content != "" {
					got++
				}
				if ch.FinishReason != "" {
					t.Errorf("%+v: got finish reason on a broken stream", tc)
				}
			}
		}
		st.Close()
		if got != tc.want {
			t.Errorf("%+v: got %d deltas before the break, want %d", tc, got, tc.want)
		}
	}
}

func TestBreakAfterNonStream(t *testing.T) {
	_, c := start(t, Script(Reply{Tokens: []string{"a", "b"}, BreakAfter: 1}))
	if _, err := c.CreateChatCompletion(testCtx(t), userReq("hi")); err == nil {
		t.Fatal("want error from broken non-stream response")
	}
}

func TestHangThenClientCancel(t *testing.T) {
	for _, stream := range []bool{true, false} {
		s, c := start(t, Script(Reply{Hang: true, Tokens: []string{"never"}}))
		ctx, cancel := context.WithCancel(testCtx(t))
		errc := make(chan error, 1)
		go func() {
			if stream {
				st, err := c.CreateChatCompletionStream(ctx, userReq("hi"))
				if err != nil {
					errc <- err
					return
				}
				defer st.Close()
				_, err = st.Recv()
				errc <- err
				return
			}
			_, err := c.CreateChatCompletion(ctx, userReq("hi"))
			errc <- err
		}()
		testkit.Eventually(t, "the hanging request is active", func() bool { return s.Active() == 1 })
		select {
		case err := <-errc:
			t.Fatalf("stream=%v: client returned while server hangs: %v", stream, err)
		case <-time.After(100 * time.Millisecond):
		}
		cancel()
		waitDisconnect(t, s)
		if err := <-errc; err == nil {
			t.Errorf("stream=%v: want error after cancel", stream)
		}
		waitIdle(t, s)
	}
}

func TestCancelMidStream(t *testing.T) {
	tokens := make([]string, 40)
	for i := range tokens {
		tokens[i] = " x"
	}
	s, c := start(t, Script(Reply{Tokens: tokens, Interval: 50 * time.Millisecond}))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	st, err := c.CreateChatCompletionStream(ctx, userReq("hi"))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	defer st.Close()
	for got := 0; got < 2; {
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		for _, ch := range resp.Choices {
			if ch.Delta.Content != "" {
				got++
			}
		}
	}
	start := time.Now()
	cancel()
	waitDisconnect(t, s)
	// Well under the remaining ~1.9s of stream: the wait noticed the
	// cancellation instead of running out the clock.
	if d := time.Since(start); d > time.Second {
		t.Errorf("disconnect took %v", d)
	}
	waitIdle(t, s)
}

// TestCancelBeforeFirstChunk proves the inter-chunk wait watches the request
// context: with a 3s interval, only the wait (not a failing write) can notice
// the cancellation within the deadline.
func TestCancelBeforeFirstChunk(t *testing.T) {
	s, c := start(t, Script(Reply{Tokens: []string{"a", "b"}, Interval: 3 * time.Second}))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	st, err := c.CreateChatCompletionStream(ctx, userReq("hi"))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	defer st.Close()
	began := time.Now()
	cancel()
	waitDisconnect(t, s)
	if d := time.Since(began); d > time.Second {
		t.Errorf("disconnect noticed after %v", d)
	}
	waitIdle(t, s)
}

// TestWireFormat checks the raw SSE bytes, which a lenient client would not
// notice: every event is "data: <json>\n\n", the usage chunk has an empty
// (not null) choices array, and the stream ends with [DONE].
func TestWireFormat(t *testing.T) {
	s, _ := start(t, Script(Reply{Tokens: []string{"Hi", " you"}}))
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"12345678"}]}`
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if !strings.HasSuffix(text, "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with [DONE]: %q", text)
	}
	events := strings.Split(strings.TrimSuffix(text, "\n\n"), "\n\n")
	if len(events) != 5 { // 2 content, stop, usage, [DONE]
		t.Fatalf("got %d events: %q", len(events), text)
	}
	var chunks []map[string]json.RawMessage
	for _, ev := range events[:4] {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event without data prefix: %q", ev)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("bad event JSON %q: %v", data, err)
		}
		chunks = append(chunks, m)
	}
	wantChoices := []string{
		`[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]`,
		`[{"index":0,"delta":{"content":" you"},"finish_reason":null}]`,
		`[{"index":0,"delta":{},"finish_reason":"stop"}]`,
		`[]`,
	}
	for i, m := range chunks {
		if got := string(m["choices"]); got != wantChoices[i] {
			t.Errorf("chunk %d choices = %s, want %s", i, got, wantChoices[i])
		}
		if string(m["object"]) != `"chat.completion.chunk"` || string(m["model"]) != `"m"` || string(m["id"]) != string(chunks[0]["id"]) {
			t.Errorf("chunk %d envelope = %v", i, m)
		}
	}
	if got, want := string(chunks[3]["usage"]), `{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}`; got != want {
		t.Errorf("usage = %s, want %s", got, want)
	}
	if _, ok := chunks[0]["usage"]; ok {
		t.Error("content chunk carries usage")
	}
}

func TestRequestsRecorded(t *testing.T) {
	s, c := start(t, Echo(0))
	req := openai.ChatCompletionRequest{
		Model: "vision-model",
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "be brief"},
			{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{
				{Type: openai.ChatMessagePartTypeText, Text: "what is this?"},
				{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64,AAAA"}},
			}},
		},
	}
	resp, err := c.CreateChatCompletion(testCtx(t), req)
	if err != nil {
		t.Fatalf("CreateChatCompletion: %v", err)
	}
	if got := resp.Choices[0].Message.Content; got != "You said: what is this?." {
		t.Errorf("echo = %q", got)
	}
	st, err := c.CreateChatCompletionStream(testCtx(t), userReq("second"))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	st.Close()
	waitIdle(t, s)

	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("Requests() = %d, want 2", len(reqs))
	}
	r := reqs[0]
	if r.Model != "vision-model" || r.Stream {
		t.Errorf("model=%q stream=%v", r.Model, r.Stream)
	}
	want := []Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "what is this?", Images: 1},
	}
	if len(r.Messages) != len(want) {
		t.Fatalf("messages = %+v, want %+v", r.Messages, want)
	}
	for i := range want {
		if !reflect.DeepEqual(r.Messages[i], want[i]) {
			t.Errorf("message %d = %+v, want %+v", i, r.Messages[i], want[i])
		}
	}
	if got := r.Header.Get("Authorization"); got != "Bearer key" {
		t.Errorf("Authorization = %q", got)
	}
	if !json.Valid(r.Raw) || !strings.Contains(string(r.Raw), "image_url") {
		t.Errorf("Raw = %s", r.Raw)
	}
	if !reqs[1].Stream || reqs[1].Messages[0].Content != "second" {
		t.Errorf("second request = %+v", reqs[1])
	}

	// Returned values are copies: mutating them must not leak back.
	reqs[0].Messages[0].Content = "mutated"
	reqs[0].Raw[0] = 'X'
	again := s.Requests()
	if again[0].Messages[0].Content != "be brief" || again[0].Raw[0] == 'X' {
		t.Error("Requests() returned shared storage")
	}

	s.SetRecording(false)
	if _, err := c.CreateChatCompletion(testCtx(t), userReq("third")); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("recording off: %d requests kept", n)
	}
}

func TestWords(t *testing.T) {
	if got, want := Words("Hello there."), []string{"Hello", " there."}; !equal(got, want) {
		t.Errorf("Words = %q, want %q", got, want)
	}
	if got, want := Words("a  b\n\nc "), []string{"a", "  b", "\n\nc", " "}; !equal(got, want) {
		t.Errorf("Words = %q, want %q", got, want)
	}
	if got, want := Words("你好。Go!"), []string{"你", "好。", "Go!"}; !equal(got, want) {
		t.Errorf("Words = %q, want %q", got, want)
	}
	if got := Words(""); len(got) != 0 {
		t.Errorf("Words(\"\") = %q", got)
	}
	for _, s := range []string{
		"Hello there.",
		"  leading and trailing  ",
		"multiple   spaces\tand\ttabs\n\nnewlines",
		"你好，世界！今日は良い天気ですね。",
		"mixed 中文 and English, 한국어 텍스트.",
		"emoji 👋🏽 ok",
		"\xff\xfe invalid utf8 \xc3",
		" ",
	} {
		got := Words(s)
		if strings.Join(got, "") != s {
			t.Errorf("Words(%q) = %q does not round-trip", s, got)
		}
		for _, w := range got {
			if w == "" {
				t.Errorf("Words(%q) produced an empty delta", s)
			}
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestScript(t *testing.T) {
	f := Script(Reply{Tokens: []string{"1"}}, Reply{Tokens: []string{"2"}})
	var got []string
	for range 4 {
		got = append(got, f(Request{}).Tokens[0])
	}
	if want := []string{"1", "2", "2", "2"}; !equal(got, want) {
		t.Errorf("Script = %q, want %q", got, want)
	}
	if r := Script()(Request{}); len(r.Tokens) != 0 || r.Status != 0 {
		t.Errorf("empty Script = %+v", r)
	}
}

func TestCloseWithHangingStream(t *testing.T) {
	s, err := Start("127.0.0.1:0", Script(Reply{Hang: true}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := openai.DefaultConfig("key")
	cfg.BaseURL = s.URL()
	c := openai.NewClientWithConfig(cfg)
	st, err := c.CreateChatCompletionStream(testCtx(t), userReq("hi"))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	defer st.Close()
	recvErr := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		recvErr <- err
	}()

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(guard):
		t.Fatal("Close did not return with a hanging stream active")
	}
	if n := s.Active(); n != 0 {
		t.Errorf("Active() after Close = %d", n)
	}
	select {
	case err := <-recvErr:
		if err == nil {
			t.Error("Recv succeeded on a closed server")
		}
	case <-time.After(guard):
		t.Error("client stream not closed by server Close")
	}
	select {
	case <-s.Disconnects():
		t.Error("server shutdown reported as client disconnect")
	default:
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestEndpoints(t *testing.T) {
	s, c := start(t, Echo(0))
	models, err := c.ListModels(testCtx(t))
	if err != nil {
		t.Fatalf("ListModels: %v", err)
	}
	if len(models.Models) != 1 || models.Models[0].ID != ModelID {
		t.Errorf("models = %+v", models.Models)
	}

	checkErr := func(resp *http.Response, status int) {
		t.Helper()
		defer resp.Body.Close()
		if resp.StatusCode != status {
			t.Errorf("status = %d, want %d", resp.StatusCode, status)
		}
		var body struct {
			Error *struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error == nil || body.Error.Message == "" || body.Error.Type == "" {
			t.Errorf("error body not OpenAI-style: %v %+v", err, body.Error)
		}
	}
	for _, path := range []string{"/v1/nope", "/", "/v1/chat/completions/x"} {
		resp, err := http.Get(strings.TrimSuffix(s.URL(), "/v1") + path)
		if err != nil {
			t.Fatal(err)
		}
		checkErr(resp, http.StatusNotFound)
	}
	resp, err := http.Get(s.URL() + "/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	checkErr(resp, http.StatusNotFound)

	for _, body := range []string{
		"{not json",
		"",
		`{"messages":[{"role":"user","content":42}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":7}]}]}`,
		`{"messages":"nope"}`,
		`[]`,
	} {
		resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		checkErr(resp, http.StatusBadRequest)
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("invalid requests were recorded: %d", n)
	}

	// A null content (tool-call-only assistant message) is valid.
	resp, err = http.Post(s.URL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"assistant","content":null},{"role":"user","content":"yo"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("null content: status %d", resp.StatusCode)
	}
}

func TestResponderPanicBecomes500(t *testing.T) {
	_, c := start(t, func(Request) Reply { panic("oops") })
	_, err := c.CreateChatCompletion(testCtx(t), userReq("hi"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || !strings.Contains(apiErr.Message, "oops") {
		t.Errorf("err = %v", err)
	}
}

func TestConcurrentStreams(t *testing.T) {
	s, c := start(t, Echo(time.Millisecond))
	const n = 20
	errc := make(chan error, n)
	for i := range n {
		go func() {
			st, err := c.CreateChatCompletionStream(testCtx(t), userReq(strings.Repeat("w ", i)))
			if err != nil {
				errc <- err
				return
			}
			defer st.Close()
			for {
				if _, err := st.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						err = nil
					}
					errc <- err
					return
				}
			}
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	if got := len(s.Requests()); got != n {
		t.Errorf("Requests() = %d, want %d", got, n)
	}
}
