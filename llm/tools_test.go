package llm_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"koe/agent"
	"koe/testkit/fakellm"
)

var calculatorSpec = agent.ToolSpec{
	Name:        "calculator",
	Description: "Evaluates an arithmetic expression.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}`),
}

func toolRequest(text string) agent.Request {
	req := userMsgs(text)
	req.Tools = []agent.ToolSpec{calculatorSpec, {Name: "get_current_datetime", Description: "The date and time."}}
	return req
}

// Tool calls streamed in fragments (id and name first, then the arguments
// in pieces, for each of two calls) come back whole and in order,
// after the text the model said first.
func TestStreamToolCalls(t *testing.T) {
	want := []agent.ToolCall{
		{ID: "call_a", Name: "calculator", Arguments: `{"expression":"6 * 7 + sqrt(16)"}`},
		{ID: "call_b", Name: "get_current_datetime", Arguments: `{"timezone":"Europe/Berlin"}`},
	}
	var calls []fakellm.ToolCall
	for _, c := range want {
		calls = append(calls, fakellm.ToolCall(c))
	}
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"Let me", " check."}, ToolCalls: calls}))
	var got []string
	res, err := clientFor(s).Stream(testCtx(t), toolRequest("what is six times seven plus four, and the time?"), func(d string) { got = append(got, d) })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if strings.Join(got, "") != "Let me check." {
		t.Errorf("text = %q", got)
	}
	if !reflect.DeepEqual(res.ToolCalls, want) {
		t.Errorf("tool calls = %+v, want %+v", res.ToolCalls, want)
	}
	r := s.Requests()[0]
	if !reflect.DeepEqual(r.Tools, []string{"calculator", "get_current_datetime"}) || r.ToolChoice != "" {
		t.Errorf("the server got tools %q and tool_choice %q; want both tools and no tool_choice", r.Tools, r.ToolChoice)
	}
}

// A reply that is nothing but a tool call is a reply, not an empty one.
func TestStreamToolCallWithoutText(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":"1+1"}`}}}))
	res, err := clientFor(s).Stream(testCtx(t), toolRequest("one plus one"), func(d string) { t.Errorf("text %q", d) })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Arguments != `{"expression":"1+1"}` {
		t.Errorf("tool calls = %+v", res.ToolCalls)
	}
}

// The last cycle of a turn describes the tools but forbids calling them;
// a request without tools sends no tool_choice, which some servers refuse.
func TestToolChoiceNone(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"Done."}}))
	req := toolRequest("answer now")
	req.ToolChoice = agent.ToolChoiceNone
	if _, err := clientFor(s).Stream(testCtx(t), req, func(string) {}); err != nil {
		t.Fatal(err)
	}
	plain := userMsgs("no tools")
	plain.ToolChoice = agent.ToolChoiceNone
	if _, err := clientFor(s).Stream(testCtx(t), plain, func(string) {}); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if reqs[0].ToolChoice != "none" || len(reqs[0].Tools) != 2 {
		t.Errorf("last cycle: tool_choice %q with %d tools, want \"none\" with 2", reqs[0].ToolChoice, len(reqs[0].Tools))
	}
	if _, sent := rawField(t, reqs[1], "tool_choice"); sent || len(reqs[1].Tools) != 0 {
		t.Errorf("a request without tools sent tool_choice or tools: %s", reqs[1].Raw)
	}
}

// A server or model that refuses tools gets one error naming the setting
// that turns them off; the same refusal without tools stays a bad request.
func TestToolsRefused(t *testing.T) {
	for _, refusal := range []fakellm.Reply{
		{Status: 400, ErrorMessage: "gemma:2b does not support tools"},
		{Status: 500, ErrorMessage: "tools param requires --jinja flag"},
		{Status: 400, ErrorMessage: `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`},
	} {
		s := startLLM(t, fakellm.Script(refusal, refusal))
		_, err := clientFor(s).Stream(testCtx(t), toolRequest("hi"), func(string) {})
		le := llmError(t, err)
		if le.Kind != agent.KindToolsUnsupported || !strings.Contains(err.Error(), "tools.enabled") || !strings.Contains(err.Error(), refusal.ErrorMessage) {
			t.Errorf("%q: kind %v, %v; want the tools error naming tools.enabled and quoting the server", refusal.ErrorMessage, le.Kind, err)
		}
		_, err = clientFor(s).Stream(testCtx(t), userMsgs("hi"), func(string) {})
		if le := llmError(t, err); le.Kind == agent.KindToolsUnsupported {
			t.Errorf("%q without tools offered: %v", refusal.ErrorMessage, err)
		}
	}
	// Refusals that are not about tools keep their own explanation.
	s := startLLM(t, fakellm.Script(fakellm.Reply{Status: 400, ErrorMessage: "context length exceeded"}))
	_, err := clientFor(s).Stream(testCtx(t), toolRequest("hi"), func(string) {})
	if le := llmError(t, err); le.Kind != agent.KindBadRequest {
		t.Errorf("a context-length refusal with tools: kind %v, %v", le.Kind, err)
	}
}

// The assistant's calls and the tool results go back to the server in
// OpenAI's shape: tool_calls on the assistant message, tool_call_id and
// name on each result.
func TestToolMessagesSent(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"42."}}))
	req := toolRequest("six times seven")
	req.Messages = append(req.Messages,
		agent.WireMessage{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
		agent.WireMessage{Role: agent.RoleTool, ToolCallID: "c1", Name: "calculator", Content: "42"},
	)
	if _, err := clientFor(s).Stream(testCtx(t), req, func(string) {}); err != nil {
		t.Fatal(err)
	}
	msgs := s.Requests()[0].Messages
	if len(msgs) != 3 {
		t.Fatalf("messages = %+v", msgs)
	}
	call, result := msgs[1], msgs[2]
	if call.Role != "assistant" || !reflect.DeepEqual(call.ToolCalls, []fakellm.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}) {
		t.Errorf("assistant message = %+v", call)
	}
	if result.Role != "tool" || result.ToolCallID != "c1" || result.Name != "calculator" || result.Content != "42" {
		t.Errorf("tool message = %+v", result)
	}
}
