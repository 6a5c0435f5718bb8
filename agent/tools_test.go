package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/agent"
	"koe/testkit/fakellm"
)

// testBox is a Toolbox of three tools: add sums its arguments, fail
// always fails, wait runs until its context ends (and says so on gone).
type testBox struct {
	gone chan string // wait's call id, once its context ended
}

func newTestBox() *testBox { return &testBox{gone: make(chan string, 8)} }

func (b *testBox) Specs() []agent.ToolSpec {
	return []agent.ToolSpec{
		{Name: "add", Description: "Adds a and b.", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`)},
		{Name: "fail", Description: "Always fails."},
		{Name: "wait", Description: "Waits."},
	}
}

func (b *testBox) Call(ctx context.Context, c agent.ToolCall) (string, error) {
	switch c.Name {
	case "add":
		var args struct{ A, B float64 }
		if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
			return "", fmt.Errorf("bad arguments: %w", err)
		}
		return fmt.Sprint(args.A + args.B), nil
	case "fail":
		return "", errors.New("boom")
	case "wait":
		<-ctx.Done()
		b.gone <- c.ID
		return "", ctx.Err()
	}
	return "", fmt.Errorf("there is no tool named %q", c.Name)
}

// toolEvents is a ToolEmitter that records what it heard, in order.
type toolEvents struct {
	tokens
	mu      sync.Mutex
	events  []string
	started chan agent.ToolCall
}

func newToolEvents() *toolEvents { return &toolEvents{started: make(chan agent.ToolCall, 8)} }

func (e *toolEvents) note(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, s)
}

func (e *toolEvents) ToolsCalled(calls []agent.ToolCall) {
	e.note(fmt.Sprintf("called %d", len(calls)))
}
func (e *toolEvents) ToolStarted(c agent.ToolCall) {
	e.note("start " + c.ID)
	e.started <- c
}
func (e *toolEvents) ToolFinished(c agent.ToolCall, result string, err error) {
	if err != nil {
		e.note("error " + c.ID + ": " + err.Error())
		return
	}
	e.note("done " + c.ID + ": " + result)
}

func (e *toolEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.events...)
}

func toolAgent(t *testing.T, box agent.Toolbox, mutate func(*agent.Options), replies ...fakellm.Reply) (*agent.Agent, *fakellm.Server) {
	t.Helper()
	s := startLLM(t, fakellm.Script(replies...))
	opts := testOptions(clientFor(s), persona)
	opts.Tools = box
	if mutate != nil {
		mutate(&opts)
	}
	a := agent.New(opts)
	t.Cleanup(a.Close)
	return a, s
}

// A cycle that calls tools runs them at once and feeds their results back
// in call order, a failure as "Error: …"; the next cycle answers. Every
// request alternates roles (the fake refuses any that does not), and the
// next turn sees the old results elided.
func TestToolCycle(t *testing.T) {
	a, s := toolAgent(t, newTestBox(), nil,
		fakellm.Reply{Tokens: []string{"Let me", " add."}, ToolCalls: []fakellm.ToolCall{
			{ID: "c1", Name: "add", Arguments: `{"a":2,"b":3}`},
			{ID: "c2", Name: "fail", Arguments: `{}`},
		}},
		fakellm.Reply{Tokens: []string{"It is 5."}},
		fakellm.Reply{Tokens: []string{"Yes."}},
	)
	a.AddUser("what is 2 + 3?")
	em := newToolEvents()
	if err := a.Reply(testCtx(t), em); err != nil {
		t.Fatal(err)
	}
	a.AddAssistant("It is 5.", false)
	if em.text() != "Let me add.It is 5." {
		t.Errorf("streamed %q", em.text())
	}
	ev := em.list()
	if len(ev) != 5 || ev[0] != "called 2" || ev[1] != "start c1" || ev[2] != "start c2" ||
		!slicesHave(ev[3:], "done c1: 5", "error c2: boom") {
		t.Errorf("events %q", ev)
	}
	reqs := chatRequests(s)
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if !reflect.DeepEqual(reqs[0].Tools, []string{"add", "fail", "wait"}) || reqs[0].ToolChoice != "" {
		t.Errorf("first cycle: tools %q, tool_choice %q", reqs[0].Tools, reqs[0].ToolChoice)
	}
	if !strings.Contains(reqs[0].Messages[0].Content, "Tools you can call now: add, fail, wait.") {
		t.Errorf("system prompt does not list the tools: %q", reqs[0].Messages[0].Content)
	}
	m := reqs[1].Messages
	n := len(m)
	call, r1, r2 := m[n-3], m[n-2], m[n-1]
	if call.Role != "assistant" || call.Content != "Let me add." || len(call.ToolCalls) != 2 {
		t.Errorf("the calls went back as %+v", call)
	}
	if r1.Role != "tool" || r1.ToolCallID != "c1" || r1.Content != "5" || r2.ToolCallID != "c2" || r2.Content != "Error: boom" {
		t.Errorf("results went back as %+v, %+v", r1, r2)
	}

	a.AddUser("sure?")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatal(err)
	}
	next := chatRequests(s)[2].Messages
	var results []string
	for _, msg := range next {
		if msg.Role == "tool" {
			results = append(results, msg.Content)
		}
	}
	if len(results) != 2 || results[0] == "5" || results[0] != results[1] {
		t.Errorf("the earlier turn's results were sent as %q; want both elided", results)
	}
}

// The last allowed cycle describes the tools but must answer; a model that
// calls them anyway ends the turn with an error naming llm.max_cycles.
func TestToolCycleCap(t *testing.T) {
	again := fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "x", Name: "add", Arguments: `{"a":1,"b":1}`}}}
	a, s := toolAgent(t, newTestBox(), func(o *agent.Options) { o.MaxCycles = 3 }, again, again, again)
	a.AddUser("loop")
	err := a.Reply(testCtx(t), &tokens{})
	if le := llmError(t, err); le.Kind != agent.KindTooManyCycles || !strings.Contains(err.Error(), "llm.max_cycles") {
		t.Fatalf("kind %v: %v", le.Kind, err)
	}
	reqs := chatRequests(s)
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		wantChoice := ""
		if i == 2 {
			wantChoice = "none"
		}
		if r.ToolChoice != wantChoice || len(r.Tools) != 3 {
			t.Errorf("cycle %d: tool_choice %q with %d tools, want %q with 3", i+1, r.ToolChoice, len(r.Tools), wantChoice)
		}
	}
	if !strings.Contains(reqs[2].Messages[0].Content, "No more tools can be called") {
		t.Errorf("the last cycle's system prompt does not say so: %q", reqs[2].Messages[0].Content)
	}
}

// A tool that does not answer within tools.timeout is told to the model
// as an error, and the turn goes on.
func TestToolTimeout(t *testing.T) {
	box := newTestBox()
	a, s := toolAgent(t, box, func(o *agent.Options) { o.ToolTimeout = 10 * time.Millisecond },
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "w", Name: "wait"}}},
		fakellm.Reply{Tokens: []string{"It took too long."}},
	)
	a.AddUser("wait for it")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatal(err)
	}
	if id := <-box.gone; id != "w" {
		t.Errorf("gone %q", id)
	}
	m := chatRequests(s)[1].Messages
	if got := m[len(m)-1].Content; got != "Error: no answer within 10ms (tools.timeout)" {
		t.Errorf("the model was told %q", got)
	}
}

// An interrupt while tools run cancels them at once; memory keeps every
// call with a result, so the next turn's request is well formed.
func TestToolInterrupted(t *testing.T) {
	box := newTestBox()
	a, s := toolAgent(t, box, nil,
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "w1", Name: "wait"}, {ID: "a1", Name: "add", Arguments: `{"a":1,"b":2}`}}},
		fakellm.Reply{Tokens: []string{"Hello again."}},
	)
	a.AddUser("wait")
	ctx, cancel := context.WithCancel(testCtx(t))
	em := newToolEvents()
	errc := make(chan error, 1)
	go func() { errc <- a.Reply(ctx, em) }()
	<-em.started
	<-em.started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Reply after the interrupt: %v", err)
	}
	if id := <-box.gone; id != "w1" {
		t.Errorf("gone %q", id)
	}
	a.AddAssistant("", true)
	a.AddUser("hi")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatalf("the turn after: %v", err)
	}
	var results []string
	for _, m := range chatRequests(s)[1].Messages {
		if m.Role == "tool" {
			results = append(results, m.ToolCallID)
		}
	}
	if !reflect.DeepEqual(results, []string{"w1", "a1"}) {
		t.Errorf("tool results in the next request: %q", results)
	}
}

// Without tools a turn is one plain request, as before.
func TestNoToolsOneCycle(t *testing.T) {
	a, s := toolAgent(t, nil, nil, fakellm.Reply{Tokens: []string{"Hi."}})
	a.AddUser("hello")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatal(err)
	}
	r := chatRequests(s)[0]
	if len(r.Tools) != 0 || r.ToolChoice != "" || strings.Contains(r.Messages[0].Content, "Tools") {
		t.Errorf("a request without tools: %s", r.Raw)
	}
}

// slicesHave reports whether got holds exactly want, in any order.
func slicesHave(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		if seen[w] == 0 {
			return false
		}
		seen[w]--
	}
	return true
}

// searchBox adds a search tool to testBox.
type searchBox struct{ *testBox }

func (b searchBox) Specs() []agent.ToolSpec {
	return append(b.testBox.Specs(), agent.ToolSpec{Name: "search", Description: "Searches."})
}

func (b searchBox) Call(ctx context.Context, c agent.ToolCall) (string, error) {
	if c.Name == "search" {
		return `{"documents":[{"document":1,"title":"Berlin","metadata":{"url":"https://example.org/berlin"},"contents":"Berlin is the capital of Germany."}]}`, nil
	}
	return b.testBox.Call(ctx, c)
}

func (searchBox) IsSearch(name string) bool { return name == "search" }

// After a search tool ran, every later cycle of the turn has a citation
// section in its system prompt and ends with a citation reminder; before
// it, and in the next turn, neither.
func TestCitationAfterSearch(t *testing.T) {
	a, s := toolAgent(t, searchBox{newTestBox()}, nil,
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "a", Name: "add", Arguments: `{"a":1,"b":1}`}}},
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "s", Name: "search", Arguments: `{"query":"capital of Germany"}`}}},
		fakellm.Reply{Tokens: []string{"Berlin [1]."}},
		fakellm.Reply{Tokens: []string{"Yes."}},
	)
	a.AddUser("what is the capital of Germany?")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatal(err)
	}
	a.AddAssistant("Berlin [1].", false)
	a.AddUser("sure?")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatal(err)
	}
	reqs := chatRequests(s)
	for i, r := range reqs {
		cited := strings.Contains(r.Messages[0].Content, "Citations:")
		last := r.Messages[len(r.Messages)-1]
		reminded := last.Role == "user" && strings.Contains(last.Content, "Cite the documents you used")
		want := i == 2
		if cited != want || reminded != want {
			t.Errorf("request %d: citation section %v, reminder %v; want %v (last message %+v)", i, cited, reminded, want, last)
		}
	}
	if m := reqs[2].Messages; m[len(m)-2].Role != "tool" || m[len(m)-2].ToolCallID != "s" {
		t.Errorf("the reminder does not follow the search result: %+v", m[len(m)-2])
	}
}

// Joined boxes offer every tool once, route each call to its box, and
// keep search tools searches.
func TestJoinToolboxes(t *testing.T) {
	var none *testBox
	if agent.JoinToolboxes(nil, none) != nil {
		t.Error("nothing joined is not nil")
	}
	one := newTestBox()
	if agent.JoinToolboxes(none, one) != agent.Toolbox(one) {
		t.Error("one box is not itself")
	}
	j := agent.JoinToolboxes(one, searchBox{newTestBox()})
	var names []string
	for _, s := range j.Specs() {
		names = append(names, s.Name)
	}
	if !reflect.DeepEqual(names, []string{"add", "fail", "wait", "search"}) {
		t.Errorf("names %q", names)
	}
	if got, err := j.Call(testCtx(t), agent.ToolCall{Name: "search"}); err != nil || !strings.Contains(got, "documents") {
		t.Errorf("search: %q, %v", got, err)
	}
	if got, err := j.Call(testCtx(t), agent.ToolCall{Name: "add", Arguments: `{"a":1,"b":2}`}); err != nil || got != "3" {
		t.Errorf("add: %q, %v", got, err)
	}
	if _, err := j.Call(testCtx(t), agent.ToolCall{Name: "nope"}); err == nil {
		t.Error("an unknown tool was called")
	}
	s, ok := j.(agent.Searcher)
	if !ok || !s.IsSearch("search") || s.IsSearch("add") {
		t.Error("the joined box does not tell searches")
	}
}

// A model that calls a tool when the request offered none (the
// character's MCP server is not connected yet) ends the turn with an error
// that says so, not one that sends the user to llm.max_cycles.
func TestToolCallNobodyOffered(t *testing.T) {
	call := fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "x", Name: "srv__delete_note", Arguments: `{}`}}}
	a, s := toolAgent(t, noTools{}, nil, call)
	a.AddUser("delete it")
	err := a.Reply(testCtx(t), &tokens{})
	le := llmError(t, err)
	if le.Kind != agent.KindUnofferedTools || strings.Contains(err.Error(), "max_cycles") || !strings.Contains(err.Error(), "srv__delete_note") {
		t.Fatalf("kind %v: %v", le.Kind, err)
	}
	if reqs := chatRequests(s); len(reqs) != 1 || len(reqs[0].Tools) != 0 {
		t.Fatalf("%d requests (the first offering %d tools), want one offering none", len(reqs), len(reqs[0].Tools))
	}
}

// noTools is a toolbox whose servers are all down: it offers nothing.
type noTools struct{}

func (noTools) Specs() []agent.ToolSpec { return nil }
func (noTools) Call(context.Context, agent.ToolCall) (string, error) {
	return "", errors.New("no tool is connected")
}
