package conversation_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"koe"
	"koe/agent"
	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
)

// clientLookup is a tool the client runs itself.
var clientLookup = agent.ClientTools{Specs: []agent.ToolSpec{{
	Name: "lookup", Description: "Looks a word up in the client's dictionary.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}}}`),
}}}

// respond plays the turn of a Response with the client's tools (no
// words: it goes on from the results given).
func (r *rig) respond(text string, tools agent.ClientTools) []mock.Frame {
	r.t.Helper()
	if err := r.sess.Respond(conversation.Response{Text: text, Tools: &tools}); err != nil {
		r.t.Fatalf("Respond: %v", err)
	}
	return r.playedTurn(text)
}

// storedSteps is a history's records as role[:call ids], metadata left out.
func storedSteps(recs []koe.Record) []string {
	var out []string
	for _, rec := range recs {
		if rec.Role == koe.RoleMetadata {
			continue
		}
		s := rec.Role
		if rec.ToolCallID != "" {
			s += ":" + rec.ToolCallID + "=" + rec.Content
		}
		for _, c := range rec.ToolCalls {
			s += "+" + c.ID
		}
		if rec.Role == koe.RoleAI || rec.Role == koe.RoleHuman {
			s += ":" + rec.Content
		}
		out = append(out, s)
	}
	return out
}

// handedOut is the client-tool-calls events among frames.
func handedOut(t *testing.T, frames []mock.Frame) []protocol.ClientToolCalls {
	t.Helper()
	var out []protocol.ClientToolCalls
	for _, f := range frames {
		if f.Type == protocol.TypeClientToolCalls {
			var ev protocol.ClientToolCalls
			mustUnmarshal(t, f.JSON, &ev)
			out = append(out, ev)
		}
	}
	return out
}

// A turn whose model calls the client's tool and koe's calculator runs the
// calculator, hands the client its call and ends with no answer; the
// client's result, given back, continues the turn with no new user
// message, and the history holds the call, both results and the answer in
// order.
func TestClientToolTurn(t *testing.T) {
	r := newRig(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("One moment."), ToolCalls: []fakellm.ToolCall{
			{ID: "k1", Name: "calculator", Arguments: `{"expression":"6 * 7"}`},
			{ID: "c1", Name: "lookup", Arguments: `{"word":"koe"}`},
		}},
		fakellm.Reply{Tokens: fakellm.Words("Koe means voice, and it is 42.")},
	), withTools("calculator"))
	frames := r.respond("what does koe mean, and what is six times seven?", clientLookup)
	calls := handedOut(t, frames)
	if len(calls) != 1 || len(calls[0].Calls) != 1 || calls[0].RunID == "" ||
		calls[0].Calls[0] != (protocol.ClientToolCall{ID: "c1", Name: "lookup", Arguments: `{"word":"koe"}`}) {
		t.Fatalf("handed out %+v", calls)
	}
	for _, f := range frames {
		var s protocol.ToolCallStatus
		if f.Type == protocol.TypeToolCallStatus {
			mustUnmarshal(t, f.JSON, &s)
			if s.ToolID != "k1" {
				t.Errorf("koe showed the client's call as its own: %+v", s)
			}
		}
	}
	if got := r.llm.Requests()[0].Tools; !reflect.DeepEqual(got, []string{"lookup", "calculator"}) {
		t.Errorf("tools offered %q", got)
	}
	if err := r.sess.SubmitToolResult("k1", "x"); err == nil || !strings.Contains(err.Error(), "no function call waits") {
		t.Errorf("a result for koe's own call: %v", err)
	}
	if err := r.sess.SubmitToolResult("c1", "voice"); err != nil {
		t.Fatal(err)
	}
	if err := r.sess.SubmitToolResult("c1", "voice"); err == nil || !strings.Contains(err.Error(), "has a result already") {
		t.Errorf("a second result for c1: %v", err)
	}

	frames = r.respond("", clientLookup)
	var msgs []string
	for _, f := range frames {
		switch f.Type {
		case protocol.TypeMessage:
			var m protocol.MessageEvent
			mustUnmarshal(t, f.JSON, &m)
			msgs = append(msgs, m.Content.Type+":"+m.Content.ToolCallID+":"+m.Content.Content)
		}
	}
	if want := []string{"tool:c1:voice", "ai::Koe means voice, and it is 42."}; !reflect.DeepEqual(msgs, want) {
		t.Errorf("the continuation's messages %q, want %q", msgs, want)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	m := reqs[1].Messages
	if n := len(m); m[n-3].Role != "assistant" || len(m[n-3].ToolCalls) != 2 || m[n-2].ToolCallID != "k1" || m[n-2].Content != "42" ||
		m[n-1].ToolCallID != "c1" || m[n-1].Content != "voice" {
		t.Errorf("the continuation's request ends %+v", m[n-3:])
	}
	want := []string{"human:what does koe mean, and what is six times seven?", "tool_call+k1+c1", "tool:k1=42", "tool:c1=voice", "ai:Koe means voice, and it is 42."}
	if got := storedSteps(r.records()); !reflect.DeepEqual(got, want) {
		t.Errorf("history\n got %q\nwant %q", got, want)
	}
}

// A call the client never answers is closed when the user speaks again:
// its error result is stored before the user's message, and the request
// carries the call with a result (an earlier turn's, so elided).
func TestClientCallClosedByUser(t *testing.T) {
	r := newRig(t, fakellm.Script(
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{}`}}},
		fakellm.Reply{Tokens: fakellm.Words("Alright.")},
		fakellm.Reply{Tokens: fakellm.Words("Still here.")},
	))
	r.respond("look it up", clientLookup)
	r.respond("never mind", clientLookup)
	closed := agent.ToolResultText("", agent.ErrNoClientResult)
	want := []string{"human:look it up", "tool_call+c1", "tool:c1=" + closed, "human:never mind", "ai:Alright."}
	if got := storedSteps(r.records()); !reflect.DeepEqual(got, want) {
		t.Errorf("history\n got %q\nwant %q", got, want)
	}
	m := r.llm.Requests()[1].Messages
	if n := len(m); n < 4 || m[n-3].ToolCalls[0].ID != "c1" || m[n-2].ToolCallID != "c1" || m[n-1].Role != "user" {
		t.Errorf("the next request: %+v", m)
	}
	// The history read back gives the same memory: nothing pending, and
	// the next request is as well formed.
	r.dispatch(protocol.Inbound{Type: protocol.TypeFetchAndSetHistory, HistoryUID: r.sess.Info().HistoryUID})
	r.until(protocol.TypeHistoryData, "")
	if err := r.sess.SubmitToolResult("c1", "late"); err == nil {
		t.Error("a result for a closed call was taken")
	}
	r.turn("still there?")
}

// A client's result is bounded as the character's own tools' are
// (tools.max_result_chars): the model gets its start and a note.
func TestClientResultCut(t *testing.T) {
	r := newRig(t, fakellm.Script(
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{}`}}},
		fakellm.Reply{Tokens: fakellm.Words("That is long.")},
	), func(d *conversation.Deps) {
		d.Characters.(*mock.Characters).DefaultChar.Tools.MaxResultChars = 300
	})
	r.respond("look it up", clientLookup)
	if err := r.sess.SubmitToolResult("c1", strings.Repeat("word ", 1000)); err != nil {
		t.Fatal(err)
	}
	r.respond("", clientLookup)
	m := r.llm.Requests()[1].Messages
	got := m[len(m)-1].Content
	if n := len([]rune(got)); n > 300 || !strings.HasPrefix(got, "word word") || !strings.Contains(got, "result cut") {
		t.Errorf("the model got %d characters: %q", n, got)
	}
}
