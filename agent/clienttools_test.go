package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"koe/agent"
	"koe/testkit/fakellm"
)

// clientEvents is a ToolEmitter that also takes client calls.
type clientEvents struct {
	*toolEvents
	handed [][]agent.ToolCall
}

func newClientEvents() *clientEvents { return &clientEvents{toolEvents: newToolEvents()} }

func (e *clientEvents) ClientCalls(calls []agent.ToolCall) {
	e.note("client " + callIDs(calls))
	e.handed = append(e.handed, calls)
}

func callIDs(calls []agent.ToolCall) string {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	return strings.Join(ids, ",")
}

// lookup is a client's tool; "add" is also koe's own (testBox's) name.
var lookup = agent.ClientTools{Specs: []agent.ToolSpec{
	{Name: "lookup", Description: "Looks a word up in the client's dictionary.", Parameters: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}}}`)},
}}

// roles is a request's messages as role[:tool_call_id], for order checks.
func roles(r fakellm.Request) []string {
	out := make([]string, 0, len(r.Messages))
	for _, m := range r.Messages {
		s := m.Role
		if m.ToolCallID != "" {
			s += ":" + m.ToolCallID
		}
		for _, c := range m.ToolCalls {
			s += "+" + c.ID
		}
		out = append(out, s)
	}
	return out
}

// A cycle calling a client tool and one of koe's runs koe's, hands the
// client's out and ends the turn; the client's result joins memory after
// the call, and the next Reply continues from it with no new user message.
func TestClientToolRoundTrip(t *testing.T) {
	a, s := toolAgent(t, newTestBox(), nil,
		fakellm.Reply{Tokens: []string{"One moment."}, ToolCalls: []fakellm.ToolCall{
			{ID: "k1", Name: "add", Arguments: `{"a":1,"b":2}`},
			{ID: "c1", Name: "lookup", Arguments: `{"word":"koe"}`},
		}},
		fakellm.Reply{Tokens: []string{"Koe means voice, and 1 + 2 is 3."}},
	)
	a.AddUser("what does koe mean, and what is 1 + 2?")
	em := newClientEvents()
	if err := a.ReplyWith(testCtx(t), em, lookup); err != nil {
		t.Fatal(err)
	}
	if got := em.list(); !reflect.DeepEqual(got, []string{"called 2", "start k1", "done k1: 3", "client c1"}) {
		t.Errorf("events %q", got)
	}
	reqs := chatRequests(s)
	if len(reqs) != 1 {
		t.Fatalf("%d requests before the client's result, want 1", len(reqs))
	}
	if !reflect.DeepEqual(reqs[0].Tools, []string{"lookup", "add", "fail", "wait"}) {
		t.Errorf("tools offered %q; want the client's first, then koe's", reqs[0].Tools)
	}
	if p := a.PendingCalls(); len(p) != 1 || p[0].ID != "c1" || p[0].Arguments != `{"word":"koe"}` {
		t.Fatalf("pending %+v", p)
	}
	if _, err := a.AddToolResult("nope", "x"); !errors.Is(err, agent.ErrUnknownCall) {
		t.Errorf("a result for an unknown call: %v", err)
	}
	if _, err := a.AddToolResult("k1", "x"); !errors.Is(err, agent.ErrUnknownCall) {
		t.Errorf("a result for koe's own call, already answered: %v", err)
	}
	if c, err := a.AddToolResult("c1", "voice"); err != nil || c.Name != "lookup" {
		t.Fatalf("the client's result: %+v, %v", c, err)
	}
	if p := a.PendingCalls(); len(p) != 0 {
		t.Errorf("still pending after the result: %+v", p)
	}
	if err := a.ReplyWith(testCtx(t), newClientEvents(), lookup); err != nil {
		t.Fatal(err)
	}
	reqs = chatRequests(s)
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	got := roles(reqs[1])
	want := []string{"assistant+k1+c1", "tool:k1", "tool:c1"}
	if len(got) < 4 || !reflect.DeepEqual(got[len(got)-3:], want) || got[len(got)-4] != "user" {
		t.Errorf("the continuation's messages %q; want …user, %q", got, want)
	}
	if last := reqs[1].Messages[len(reqs[1].Messages)-1]; last.Content != "voice" {
		t.Errorf("the client's result went as %q", last.Content)
	}
	a.AddAssistant("Koe means voice, and 1 + 2 is 3.", false)
	if p := a.PendingCalls(); len(p) != 0 {
		t.Errorf("pending after the turn's end: %+v", p)
	}
}

// A client tool named like one of koe's takes its place: the model is
// offered the name once, and its call goes to the client, never to koe's
// tool. tool_choice applies to the turn's first LLM call only.
func TestClientToolWinsItsName(t *testing.T) {
	box := newTestBox()
	a, s := toolAgent(t, box, nil,
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":1,"b":2}`}}},
		fakellm.Reply{Tokens: []string{"Done."}},
	)
	theirs := agent.ClientTools{
		Specs:  []agent.ToolSpec{{Name: "add", Description: "The client's own adder."}},
		Choice: agent.ToolChoice{Function: "add"},
	}
	a.AddUser("add")
	em := newClientEvents()
	if err := a.ReplyWith(testCtx(t), em, theirs); err != nil {
		t.Fatal(err)
	}
	if got := em.list(); !reflect.DeepEqual(got, []string{"called 1", "client c1"}) {
		t.Errorf("events %q; koe's add must not run", got)
	}
	r := chatRequests(s)[0]
	if !reflect.DeepEqual(r.Tools, []string{"add", "fail", "wait"}) {
		t.Errorf("tools %q", r.Tools)
	}
	if !strings.Contains(string(r.Raw), `"description":"The client's own adder."`) {
		t.Errorf("the client's definition was not the one sent: %s", r.Raw)
	}
	if r.ToolChoice != `{"type":"function","function":{"name":"add"}}` {
		t.Errorf("tool_choice %s", r.ToolChoice)
	}
	if _, err := a.AddToolResult("c1", "3"); err != nil {
		t.Fatal(err)
	}
	if err := a.ReplyWith(testCtx(t), em, agent.ClientTools{Specs: theirs.Specs, Choice: agent.ToolChoice{Mode: agent.ToolChoiceRequired}}); err != nil {
		t.Fatal(err)
	}
	if got := chatRequests(s)[1].ToolChoice; got != "required" {
		t.Errorf("the continuation's tool_choice %q", got)
	}
}

// A pending call with no result when the user speaks again is closed as
// an interrupted tool's is: the next request carries it with an error
// result, never without one.
func TestClientCallClosedByNextMessage(t *testing.T) {
	a, s := toolAgent(t, nil, nil,
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{}`}}},
		fakellm.Reply{Tokens: []string{"Never mind."}},
	)
	a.AddUser("look it up")
	if err := a.ReplyWith(testCtx(t), newClientEvents(), lookup); err != nil {
		t.Fatal(err)
	}
	calls, text := a.ClosePendingCalls(agent.ErrNoClientResult)
	if len(calls) != 1 || calls[0].ID != "c1" || !strings.HasPrefix(text, "Error: ") {
		t.Fatalf("closed %+v with %q", calls, text)
	}
	if again, _ := a.ClosePendingCalls(agent.ErrNoClientResult); len(again) != 0 {
		t.Errorf("closed twice: %+v", again)
	}
	a.AddUser("forget it")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatal(err)
	}
	got := roles(chatRequests(s)[1])
	want := []string{"user", "assistant+c1", "tool:c1", "user"}
	if !reflect.DeepEqual(got[1:], want) {
		t.Errorf("messages %q; want system, %q", got, want)
	}
}

// A turn stopped while koe's own tools of the cycle run never hands the
// client's calls out: they end with an interrupted result, as koe's do.
func TestClientCallInterrupted(t *testing.T) {
	box := newTestBox()
	a, _ := toolAgent(t, box, nil,
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "w1", Name: "wait"}, {ID: "c1", Name: "lookup", Arguments: `{}`}}},
	)
	a.AddUser("wait and look")
	ctx, cancel := context.WithCancel(testCtx(t))
	em := newClientEvents()
	errc := make(chan error, 1)
	go func() { errc <- a.ReplyWith(ctx, em, lookup) }()
	<-em.started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Reply after the interrupt: %v", err)
	}
	if len(em.handed) != 0 {
		t.Errorf("calls handed out after the stop: %+v", em.handed)
	}
	got := em.list()
	if last := got[len(got)-1]; !strings.HasPrefix(last, "error c1: ") {
		t.Errorf("events %q; want the client's call closed last", got)
	}
	if p := a.PendingCalls(); len(p) != 0 {
		t.Errorf("pending after the stop: %+v", p)
	}
}

// What a client defines is checked: names, duplicates, schemas, the limit
// and a tool_choice naming a tool it does not define; an emitter that
// cannot hand calls out is refused before the model is asked.
func TestClientToolsValidate(t *testing.T) {
	spec := func(name, params string) agent.ToolSpec {
		return agent.ToolSpec{Name: name, Parameters: json.RawMessage(params)}
	}
	cases := []struct {
		tools agent.ClientTools
		want  string
	}{
		{agent.ClientTools{Specs: []agent.ToolSpec{spec("has space", "")}}, "is not 1 to 64"},
		{agent.ClientTools{Specs: []agent.ToolSpec{spec("a", ""), spec("a", "")}}, "defined twice"},
		{agent.ClientTools{Specs: []agent.ToolSpec{spec("a", `[1]`)}}, "JSON schema object"},
		{agent.ClientTools{Specs: []agent.ToolSpec{spec("a", ""), spec("b", ""), spec("c", "")}}, "llm.max_tools"},
		{agent.ClientTools{Specs: []agent.ToolSpec{spec("a", "")}, Choice: agent.ToolChoice{Function: "b"}}, "not among the tools"},
		{agent.ClientTools{Choice: agent.ToolChoice{Mode: "sometimes"}}, "is not auto"},
	}
	for _, c := range cases {
		if err := c.tools.Validate(2); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.tools, err, c.want)
		}
	}
	if err := lookup.Validate(2); err != nil {
		t.Errorf("a good definition: %v", err)
	}
	a, s := toolAgent(t, nil, nil)
	a.AddUser("hi")
	if err := a.ReplyWith(testCtx(t), &tokens{}, lookup); !errors.Is(err, agent.ErrNoClientEmitter) {
		t.Errorf("an emitter without ClientCalls: %v", err)
	}
	if n := len(chatRequests(s)); n != 0 {
		t.Errorf("%d requests", n)
	}
}
