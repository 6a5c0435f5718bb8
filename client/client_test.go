package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/client"
	"koe/config"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// hangGuard bounds a test's calls; CI is a loaded 2-core machine, and the
// guard is there to turn a hang into a failure, not to time anything.
const hangGuard = 60 * time.Second

const answer = "Hello there, how can I help?"

// summaries answers the memory's background summaries (the only requests
// koe does not stream), so that a test's script is only about turns.
func summaries(respond func(fakellm.Request) fakellm.Reply) func(fakellm.Request) fakellm.Reply {
	return func(r fakellm.Request) fakellm.Reply {
		if !r.Stream {
			return fakellm.Reply{Tokens: []string{"They talked."}}
		}
		return respond(r)
	}
}

// start runs a koe against a fake LLM answering with respond and returns a
// client of it.
func start(t *testing.T, respond func(fakellm.Request) fakellm.Reply, opts ...func(*config.Config)) (*client.Client, *fakellm.Server) {
	t.Helper()
	base, llm := startKoe(t, respond, opts...)
	c, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	return c, llm
}

// startKoe runs a koe against a fake LLM answering with respond and
// returns koe's base URL.
func startKoe(t *testing.T, respond func(fakellm.Request) fakellm.Reply, opts ...func(*config.Config)) (string, *fakellm.Server) {
	t.Helper()
	llm := koetest.StartLLM(t, summaries(respond))
	cfg := koetest.Config(t, t.TempDir(), llm.URL())
	for _, o := range opts {
		o(&cfg)
	}
	m := koetest.StartKoe(t, cfg)
	return "http://" + m.Addr(), llm
}

func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// turn streams one turn to its end and returns its events.
func turn(t *testing.T, c *client.Client, req protocol.ChatRequest) []client.Event {
	t.Helper()
	var events []client.Event
	for ev, err := range c.Stream(guard(t), req) {
		if err != nil {
			t.Fatalf("stream %+v: %v (after %s)", req, err, shape(events))
		}
		events = append(events, ev)
	}
	return events
}

// shape names the events in order, a run of tokens as one "token", status
// events with their task and state, messages with their type.
func shape(events []client.Event) []string {
	var out []string
	for _, ev := range events {
		s := ev.Type
		switch ev.Type {
		case protocol.EventStatus:
			s += " " + ev.Status.TaskID + " " + ev.Status.State
		case protocol.EventMessage:
			s += " " + ev.Message.Type
		case protocol.EventToken:
			if len(out) > 0 && out[len(out)-1] == s {
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

func messages(events []client.Event) []*protocol.ChatMessage {
	var out []*protocol.ChatMessage
	for _, ev := range events {
		if ev.Type == protocol.EventMessage {
			out = append(out, ev.Message)
		}
	}
	return out
}

func tokens(events []client.Event) string {
	var b strings.Builder
	for _, ev := range events {
		if ev.Type == protocol.EventToken {
			b.WriteString(ev.Token)
		}
	}
	return b.String()
}

func TestPlainTurn(t *testing.T) {
	c, llm := start(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(answer)}))
	events := turn(t, c, protocol.ChatRequest{Message: "Hi!"})

	want := []string{
		"message human",
		"status llm:1 start", "token", "status llm:1 end",
		"message ai", "end",
	}
	if got := shape(events); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if got := tokens(events); got != answer {
		t.Errorf("tokens %q, want %q", got, answer)
	}
	msgs := messages(events)
	human, ai := msgs[0], msgs[1]
	if human.Content != "Hi!" || human.AdditionalKwargs.HistoryUID == "" || human.AdditionalKwargs.ConfUID != "koe_default" {
		t.Errorf("human message %+v: want Hi! stored in a new history of koe_default", human)
	}
	if ai.Content != answer || ai.AdditionalKwargs.Interrupted {
		t.Errorf("ai message %q interrupted=%v, want %q, whole", ai.Content, ai.AdditionalKwargs.Interrupted, answer)
	}
	if ai.AdditionalKwargs.HistoryUID != human.AdditionalKwargs.HistoryUID {
		t.Errorf("ai message stored in %q, the human one in %q", ai.AdditionalKwargs.HistoryUID, human.AdditionalKwargs.HistoryUID)
	}
	md := ai.ResponseMetadata
	if md.FinishReason != "stop" || md.ModelName != fakellm.ModelID || md.TokenUsage == nil || md.TokenUsage.TotalTokens == 0 {
		t.Errorf("response_metadata %+v (usage %+v), want stop, %s and the LLM's usage", md, md.TokenUsage, fakellm.ModelID)
	}
	if reqs := llm.Requests(); len(reqs) != 1 || reqs[0].UserWords() != "Hi!" {
		t.Errorf("the LLM got %d requests, want one with the user's Hi!", len(reqs))
	}
}

// A turn with history_uid continues that history: the LLM sees the earlier
// turn, the history holds both, and listings put the newest history first.
func TestContinueHistoryAndRead(t *testing.T) {
	c, llm := start(t, fakellm.Echo(0))
	ctx := guard(t)

	first := messages(turn(t, c, protocol.ChatRequest{Message: "one"}))
	uid, conf := first[0].AdditionalKwargs.HistoryUID, first[0].AdditionalKwargs.ConfUID
	second := messages(turn(t, c, protocol.ChatRequest{Message: "two", HistoryUID: uid}))
	if got := second[0].AdditionalKwargs.HistoryUID; got != uid {
		t.Fatalf("the second turn went to history %q, want %q", got, uid)
	}
	reqs := llm.Requests()
	last := reqs[len(reqs)-1]
	var said []string
	for _, m := range last.Messages {
		if m.Role == "assistant" {
			said = append(said, m.Content)
		}
	}
	if !slices.Contains(said, "You said: one.") || last.UserWords() != "two" {
		t.Errorf("the second LLM request does not continue the first turn: %+v", last.Messages)
	}

	h, err := c.History(ctx, conf, uid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range h.Messages {
		got = append(got, m.Type+": "+m.Content)
	}
	want := []string{"human: one", "ai: You said: one.", "human: two", "ai: You said: two."}
	if !slices.Equal(got, want) || h.More || h.HistoryUID != uid || h.ConfUID != conf {
		t.Errorf("history %s/%s: %q more=%v, want %q and no more", h.ConfUID, h.HistoryUID, got, h.More, want)
	}

	// A page: the newest two messages, then the ones before them.
	page, err := c.History(ctx, conf, uid, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 2 || page.Messages[0].Content != "two" || !page.More {
		t.Fatalf("the newest page: %+v, want two messages from human: two, and more", page)
	}
	older, err := c.History(ctx, conf, uid, page.Messages[0].AdditionalKwargs.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(older.Messages) != 2 || older.Messages[0].Content != "one" || older.More {
		t.Errorf("the older page: %+v, want human: one and ai: You said: one., and no more", older)
	}

	other := messages(turn(t, c, protocol.ChatRequest{Message: "three"}))[0].AdditionalKwargs.HistoryUID
	list, err := c.Histories(ctx, conf)
	if err != nil {
		t.Fatal(err)
	}
	// Newest first, by the latest message's timestamp: it has whole
	// seconds, so the two histories of this test may tie.
	latest := map[string]string{}
	for i, e := range list {
		latest[e.UID] = e.LatestMessage.Content
		if i > 0 && e.Timestamp > list[i-1].Timestamp {
			t.Errorf("histories not newest first: %+v", list)
		}
	}
	want = []string{other + ": You said: three.", uid + ": You said: two."}
	if len(list) != 2 || latest[other] != "You said: three." || latest[uid] != "You said: two." {
		t.Errorf("histories %+v, want %q", list, want)
	}
}

func TestInvoke(t *testing.T) {
	c, _ := start(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(answer)}))
	ctx := guard(t)
	ai, err := c.Invoke(ctx, protocol.ChatRequest{Message: "Hi!"})
	if err != nil {
		t.Fatal(err)
	}
	if ai.Type != protocol.MessageAI || ai.Content != answer || ai.AdditionalKwargs.HistoryUID == "" {
		t.Fatalf("invoke: %+v, want the ai answer %q and where it is stored", ai, answer)
	}
	h, err := c.History(ctx, ai.AdditionalKwargs.ConfUID, ai.AdditionalKwargs.HistoryUID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 2 || h.Messages[1].Content != answer {
		t.Errorf("the invoked turn's history: %+v", h.Messages)
	}
}

// A turn that calls a tool: its call, its status and its result come
// between the two LLM cycles.
func TestToolTurn(t *testing.T) {
	c, _ := start(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("Let me check."), ToolCalls: []fakellm.ToolCall{
			{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6 * 7"}`},
		}},
		fakellm.Reply{Tokens: fakellm.Words("It is 42.")},
	), func(cfg *config.Config) { cfg.Character.Tools.Enabled = []string{"calculator"} })
	events := turn(t, c, protocol.ChatRequest{Message: "What is six times seven?"})
	want := []string{
		"message human",
		"status llm:1 start", "token", "status llm:1 end",
		"message ai",
		"status tool:call_1 start", "status tool:call_1 end",
		"message tool",
		"status llm:2 start", "token", "status llm:2 end",
		"message ai", "end",
	}
	if got := shape(events); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	msgs := messages(events)
	call := msgs[1]
	if len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "call_1" || call.ToolCalls[0].Name != "calculator" {
		t.Fatalf("the ai message's tool calls: %+v", call.ToolCalls)
	}
	var args map[string]string
	if err := json.Unmarshal(call.ToolCalls[0].Args, &args); err != nil || args["expression"] != "6 * 7" {
		t.Errorf("the call's args %s (%v), want the model's expression", call.ToolCalls[0].Args, err)
	}
	result := msgs[2]
	if result.ToolCallID != "call_1" || result.Name != "calculator" || result.Status != protocol.ToolSuccess || !strings.Contains(result.Content, "42") {
		t.Errorf("the tool message: %+v, want calculator's 42 for call_1", result)
	}
	if final := msgs[3]; final.Content != "It is 42." {
		t.Errorf("the final answer %q", final.Content)
	}
}

// Stop, called from another goroutine while the LLM is still writing,
// ends the turn: the stream closes with the answer so far, marked
// interrupted.
func TestStopFromAnotherGoroutine(t *testing.T) {
	c, _ := start(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("la la la "), Endless: true, Interval: 2 * time.Millisecond}))
	ctx := guard(t)

	stopped := make(chan error, 1)
	asked := false
	var uid string
	var events []client.Event
	for ev, err := range c.Stream(ctx, protocol.ChatRequest{Message: "Sing."}) {
		if err != nil {
			t.Fatalf("stream: %v after %q", err, shape(events))
		}
		events = append(events, ev)
		if ev.Type == protocol.EventMessage && ev.Message.Type == protocol.MessageHuman {
			uid = ev.Message.AdditionalKwargs.HistoryUID
		}
		if ev.Type == protocol.EventToken && !asked {
			asked = true
			go func() {
				ok, err := c.Stop(ctx, uid)
				if err == nil && !ok {
					err = errors.New("Stop reported no running turn")
				}
				stopped <- err
			}()
		}
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	got := shape(events)
	if got[len(got)-2] != "message ai" || got[len(got)-1] != "end" {
		t.Fatalf("events %q, want them to end with the ai message and end", got)
	}
	// The answer so far, marked interrupted. koe keeps what the LLM had
	// written, which may be a little more than it had streamed.
	ai := messages(events)[1]
	streamed := tokens(events)
	if !ai.AdditionalKwargs.Interrupted || ai.Content == "" || !(strings.HasPrefix(streamed, ai.Content) || strings.HasPrefix(ai.Content, streamed)) {
		t.Errorf("final message %q interrupted=%v after tokens %q: want the answer so far, marked interrupted", ai.Content, ai.AdditionalKwargs.Interrupted, streamed)
	}
	// Nothing runs any more.
	if ok, err := c.Stop(ctx, uid); err != nil || ok {
		t.Errorf("a second stop: %v, %v; want false, nil", ok, err)
	}
}

// Leaving the loop closes the response, and koe stops the turn: the LLM
// sees its client go away.
func TestBreakStopsTheTurn(t *testing.T) {
	c, llm := start(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("la la la "), Endless: true, Interval: 2 * time.Millisecond}))
	ctx := guard(t)
	for ev, err := range c.Stream(ctx, protocol.ChatRequest{Message: "Sing."}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == protocol.EventToken {
			break
		}
	}
	select {
	case <-llm.Disconnects():
	case <-ctx.Done():
		t.Fatal("the LLM stream went on after the client left the turn")
	}
}

// Cancelling the context ends the sequence with the context's error.
func TestCancelEndsTheStream(t *testing.T) {
	c, llm := start(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("la la la "), Endless: true, Interval: 2 * time.Millisecond}))
	ctx, cancel := context.WithCancel(guard(t))
	defer cancel()
	var last error
	for ev, err := range c.Stream(ctx, protocol.ChatRequest{Message: "Sing."}) {
		if err != nil {
			last = err
			continue
		}
		if ev.Type == protocol.EventToken {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) {
		t.Fatalf("the stream ended with %v, want context.Canceled", last)
	}
	select {
	case <-llm.Disconnects():
	case <-guard(t).Done():
		t.Fatal("the LLM stream went on after the client cancelled")
	}
}

// An LLM that fails: the stream says so in an error event and still ends
// with end; Invoke gets a 502.
func TestLLMFailure(t *testing.T) {
	c, _ := start(t, fakellm.Script(fakellm.Reply{Status: http.StatusInternalServerError, ErrorMessage: "model exploded"}))
	events := turn(t, c, protocol.ChatRequest{Message: "Hi!"})
	got := shape(events)
	if !slices.Contains(got, protocol.EventError) || got[len(got)-1] != protocol.EventEnd {
		t.Fatalf("events %q, want an error, then end last", got)
	}
	for _, ev := range events {
		if ev.Type == protocol.EventError && ev.Error == "" {
			t.Error("an error event with no message")
		}
	}

	_, err := c.Invoke(guard(t), protocol.ChatRequest{Message: "Hi!"})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || apiErr.Message == "" {
		t.Errorf("invoke: %v, want an *APIError 502 with koe's message", err)
	}
}

// What koe refuses before a stream starts comes back as an *APIError with
// koe's message.
func TestAPIErrors(t *testing.T) {
	const token = "a-test-token-0123456789"
	base, _ := startKoe(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(answer)}),
		func(cfg *config.Config) { cfg.Server.AuthToken = token })
	ctx := guard(t)
	c, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}

	check := func(what string, err error, status int) {
		t.Helper()
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != status || apiErr.Message == "" || apiErr.Message == http.StatusText(status) {
			t.Errorf("%s: %v, want an *APIError %d with koe's own message", what, err, status)
		}
	}
	var streamErr error
	for _, err := range c.Stream(ctx, protocol.ChatRequest{Message: "Hi!"}) {
		streamErr = err
	}
	check("stream without the token", streamErr, http.StatusUnauthorized)
	_, err = c.Histories(ctx, "koe_default")
	check("histories without the token", err, http.StatusUnauthorized)

	authed, err := client.New(base, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range authed.Stream(ctx, protocol.ChatRequest{Message: "Hi!", HistoryUID: "no-such-history"}) {
		streamErr = err
	}
	check("stream of an unknown history", streamErr, http.StatusNotFound)
	_, err = authed.Invoke(ctx, protocol.ChatRequest{Message: "Hi!", ConfUID: "no-such-character"})
	check("invoke of an unknown character", err, http.StatusNotFound)
	_, err = authed.History(ctx, "koe_default", "no-such-history", 0, 0)
	check("an unknown history", err, http.StatusNotFound)
	if ok, err := authed.Stop(ctx, "no-such-history"); ok || err != nil {
		t.Errorf("stop of a history with no turn: %v, %v; want false, nil", ok, err)
	}
	if _, err := authed.Invoke(ctx, protocol.ChatRequest{Message: "Hi!"}); err != nil {
		t.Errorf("with the token: %v", err)
	}
}
