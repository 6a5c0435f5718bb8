package fakellm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// postChat sends a raw chat request body and returns the status and body.
func postChat(t *testing.T, s *Server, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw), resp.Header
}

func TestStrictRoles(t *testing.T) {
	const (
		sys   = `{"role":"system","content":"s"}`
		user  = `{"role":"user","content":"u"}`
		asst  = `{"role":"assistant","content":"a"}`
		call  = `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
		calls = `{"role":"assistant","content":"let me look","tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]}`
		tool  = `{"role":"tool","content":"r","tool_call_id":"c1"}`
	)
	for _, tc := range []struct {
		name  string
		msgs  []string
		valid bool
	}{
		{"system user", []string{sys, user}, true},
		{"user only", []string{user}, true},
		{"alternating", []string{sys, user, asst, user, asst, user}, true},
		{"tool cycle then answer", []string{sys, user, call, tool, asst, user}, true},
		{"two tool cycles", []string{sys, user, call, tool, calls, tool, asst, user}, true},
		{"ends in tool results", []string{sys, user, call, tool}, true},
		{"user after tool results", []string{sys, user, call, tool, user}, true},
		{"two users", []string{sys, user, user}, false},
		{"persona then user", []string{sys, user, asst, user, user}, false},
		{"system in the middle", []string{sys, user, asst, sys, user}, false},
		{"two systems first", []string{sys, sys, user}, false},
		{"assistant first", []string{sys, asst, user}, false},
		{"two answers", []string{sys, user, asst, asst, user}, false},
		{"answer, tool cycle, answer", []string{sys, user, asst, call, tool, asst}, false},
		{"tool after user", []string{sys, user, tool}, false},
		{"tool after a plain answer", []string{sys, user, asst, tool}, false},
		{"unknown role", []string{sys, `{"role":"developer","content":"d"}`, user}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := start(t, Script(Reply{Tokens: []string{"ok"}}))
			s.SetStrictRoles(true)
			body := `{"model":"m","messages":[` + strings.Join(tc.msgs, ",") + `]}`
			status, answer, _ := postChat(t, s, body)
			if tc.valid {
				if status != http.StatusOK {
					t.Errorf("status %d (%s), want 200", status, answer)
				}
			} else {
				var e apiError
				if status != http.StatusBadRequest || json.Unmarshal([]byte(answer), &e) != nil ||
					e.Error.Message != AlternationError || e.Error.Type != "invalid_request_error" {
					t.Errorf("status %d %s, want 400 with %q", status, answer, AlternationError)
				}
			}
			if n := len(s.Requests()); n != 1 {
				t.Errorf("%d requests recorded, want 1", n)
			}
			// The same request passes once strictness is off.
			s.SetStrictRoles(false)
			if status, answer, _ := postChat(t, s, body); status != http.StatusOK {
				t.Errorf("not strict: status %d (%s), want 200", status, answer)
			}
		})
	}
}

// A refused request never reaches the responder: a Script's replies are
// left for the requests that pass.
func TestStrictRolesSkipsResponder(t *testing.T) {
	s, c := start(t, Script(Reply{Tokens: []string{"first"}}, Reply{Tokens: []string{"second"}}))
	s.SetStrictRoles(true)
	if status, _, _ := postChat(t, s, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`); status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", status)
	}
	resp, err := c.CreateChatCompletion(testCtx(t), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "first" {
		t.Errorf("reply %q, want the script's first", got)
	}
}

func TestBody(t *testing.T) {
	for _, tc := range []struct {
		name, body, contentType, wantType string
	}{
		{"plain text", "Ollama is running", "", "text/plain; charset=utf-8"},
		{"html", "<!DOCTYPE html><html><body><h1>Welcome</h1></body></html>\n", "text/html; charset=utf-8", "text/html; charset=utf-8"},
		{"only done", "data: [DONE]\n\n", "text/event-stream", "text/event-stream"},
	} {
		for _, stream := range []bool{true, false} {
			s, _ := start(t, Script(Reply{Body: tc.body, ContentType: tc.contentType, Tokens: []string{"never"}}))
			body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
			if stream {
				body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			}
			status, got, header := postChat(t, s, body)
			if status != http.StatusOK || got != tc.body || header.Get("Content-Type") != tc.wantType {
				t.Errorf("%s (stream %v): %d %q %q, want 200 %q %q", tc.name, stream, status, header.Get("Content-Type"), got, tc.wantType, tc.body)
			}
		}
	}
}

// An endless reply goes on past its tokens until the client leaves.
func TestEndless(t *testing.T) {
	s, c := start(t, Script(Reply{Tokens: []string{"on", " and"}, Endless: true}))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	st, err := c.CreateChatCompletionStream(ctx, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got strings.Builder
	for n := 0; n < 500; {
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("after %d deltas: %v", n, err)
		}
		for _, ch := range resp.Choices {
			if ch.FinishReason != "" {
				t.Fatalf("an endless stream finished (%s)", ch.FinishReason)
			}
			got.WriteString(ch.Delta.Content)
			n++
		}
	}
	if want := strings.Repeat("on and", 250); got.String() != want {
		t.Errorf("stream %q…, want the tokens repeated", got.String()[:40])
	}
	cancel()
	waitDisconnect(t, s)
	waitIdle(t, s)
}

// Echo answers the user's words: the last paragraph of the last user
// message, below whatever koe put above them.
func TestEchoUserWords(t *testing.T) {
	for in, want := range map[string]string{
		"hello":                           "You said: hello.",
		"You are Koe.\nBe kind.\n\nhello": "You said: hello.",
		"note\n\npersona\n\nhow are you?": "You said: how are you?.",
	} {
		req := Request{Messages: []Message{{Role: "system", Content: "s"}, {Role: "user", Content: in}, {Role: "assistant", Content: "a"}}}
		if got := strings.Join(Echo(0)(req).Tokens, ""); got != want {
			t.Errorf("Echo of %q = %q, want %q", in, got, want)
		}
	}
}
