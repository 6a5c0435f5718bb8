package agent_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/agent"
	"koe/history"
	"koe/internal/fakellm"
)

const persona = "You are Testa, a test persona."

// tokens is an Emitter that records what it was given.
type tokens struct {
	mu  sync.Mutex
	got []string
}

func (e *tokens) Token(d string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, d)
}

func (e *tokens) text() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.got, "")
}

// testNow is the agents' clock in tests: the date in the system prompt is
// then known exactly.
var testNow = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// wantSystem is the system message of every request of an agent built by
// testOptions: the packaged prompt with the names filled in, then the date.
var wantSystem = strings.NewReplacer("{character}", "Testa", "{human}", "Ann").Replace(agent.DefaultSystemPrompt) +
	"\n\nCurrent date and time: Friday, 14 March 2025, 15:09 UTC."

// noSummaries is the default policy with summaries so rare that the tests
// of context order never see one.
func noSummaries() agent.MemoryConfig {
	m := agent.DefaultMemoryConfig()
	m.Every = 1000
	return m
}

func testOptions(llm agent.LLM, persona string) agent.Options {
	return agent.Options{
		LLM:           llm,
		Persona:       persona,
		Tokenizer:     agent.NewTokenizer("gpt-4o"),
		CharacterName: "Testa",
		HumanName:     "Ann",
		Memory:        noSummaries(),
		Now:           func() time.Time { return testNow },
	}
}

func newAgent(t *testing.T, persona string, replies ...fakellm.Reply) (*agent.Agent, *fakellm.Server) {
	t.Helper()
	s := startLLM(t, fakellm.Script(replies...))
	a := agent.New(testOptions(clientFor(s), persona))
	t.Cleanup(a.Close)
	return a, s
}

// chatRequests are the streamed (reply) requests the fake LLM received.
func chatRequests(s *fakellm.Server) []fakellm.Request {
	var out []fakellm.Request
	for _, r := range s.Requests() {
		if r.Stream {
			out = append(out, r)
		}
	}
	return out
}

// reply runs one Reply and returns the request the LLM received for it.
func reply(t *testing.T, a *agent.Agent, s *fakellm.Server) (string, fakellm.Request) {
	t.Helper()
	before := len(chatRequests(s))
	var em tokens
	if err := a.Reply(testCtx(t), &em); err != nil {
		t.Fatalf("Reply: %v", err)
	}
	reqs := chatRequests(s)
	if len(reqs) != before+1 {
		t.Fatalf("Reply sent %d requests, want 1", len(reqs)-before)
	}
	return em.text(), reqs[len(reqs)-1]
}

func msg(role, content string) fakellm.Message {
	return fakellm.Message{Role: role, Content: content}
}

// notes returns the indexes of interruption notes in msgs: system messages
// other than the leading system prompt.
func notes(msgs []fakellm.Message) []int {
	var out []int
	for i, m := range msgs {
		if m.Role == agent.RoleSystem && i > 0 {
			out = append(out, i)
		}
	}
	return out
}

func TestReplyStreamsToEmitter(t *testing.T) {
	text := "Hi! I am Testa."
	a, s := newAgent(t, persona, fakellm.Reply{Tokens: fakellm.Words(text)})
	a.AddUser("who are you?")
	got, req := reply(t, a, s)
	if got != text {
		t.Errorf("emitted %q, want %q", got, text)
	}
	// The persona is a user message right above the latest user message.
	want := []fakellm.Message{msg("system", wantSystem), msg("user", persona), msg("user", "who are you?")}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages = %+v, want %+v", req.Messages, want)
	}
	// Reply does not record the answer: the caller knows what was heard.
	if m := a.Memory(); len(m) != 1 {
		t.Errorf("memory has %d messages after Reply, want 1", len(m))
	}
}

func TestContextPersonaAndOrder(t *testing.T) {
	a, s := newAgent(t, persona, fakellm.Reply{Tokens: []string{"ok"}})
	a.AddUser("one")
	a.AddAssistant("reply one", false)
	a.AddUser("two")
	a.AddAssistant("reply two", false)
	a.AddUser("three")
	_, req := reply(t, a, s)
	// The persona moves down with the conversation: it is always right
	// above the latest user message.
	want := []fakellm.Message{
		msg("system", wantSystem),
		msg("user", "one"),
		msg("assistant", "reply one"),
		msg("user", "two"),
		msg("assistant", "reply two"),
		msg("user", persona),
		msg("user", "three"),
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages =\n %+v\nwant\n %+v", req.Messages, want)
	}
}

func TestContextWithoutPersona(t *testing.T) {
	a, s := newAgent(t, "", fakellm.Reply{Tokens: []string{"ok"}})
	a.AddUser("hi")
	_, req := reply(t, a, s)
	want := []fakellm.Message{msg("system", wantSystem), msg("user", "hi")}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages = %+v, want %+v", req.Messages, want)
	}
}

func TestContextInterruptedReply(t *testing.T) {
	a, s := newAgent(t, persona, fakellm.Reply{Tokens: []string{"ok"}})
	a.AddUser("tell me a story")
	a.AddAssistant("Once upon a", true)
	a.AddUser("stop, something else")
	_, req := reply(t, a, s)
	m := req.Messages
	if len(m) != 6 {
		t.Fatalf("messages = %+v, want system, user, assistant, note, persona, user", m)
	}
	if m[0] != msg("system", wantSystem) || m[1] != msg("user", "tell me a story") ||
		m[2] != msg("assistant", "Once upon a") || m[4] != msg("user", persona) || m[5] != msg("user", "stop, something else") {
		t.Errorf("messages = %+v", m)
	}
	if m[3].Role != "system" || !strings.Contains(m[3].Content, "interrupted") {
		t.Errorf("message after the interrupted reply = %+v, want an interruption note", m[3])
	}
	if got := notes(m); !reflect.DeepEqual(got, []int{3}) {
		t.Errorf("notes at %v, want exactly one at 3", got)
	}
	// The heard part is sent as heard: no ellipsis or marker appended.
	if m[2].Content != "Once upon a" {
		t.Errorf("interrupted content = %q", m[2].Content)
	}
}

func TestContextInterruptedBeforeAnythingWasHeard(t *testing.T) {
	a, s := newAgent(t, persona, fakellm.Reply{Tokens: []string{"ok"}})
	a.AddUser("hello")
	a.AddAssistant("", true)
	a.AddUser("hello?")
	_, req := reply(t, a, s)
	m := req.Messages
	if len(m) != 5 {
		t.Fatalf("messages = %+v, want system, user, note, persona, user", m)
	}
	if m[0] != msg("system", wantSystem) || m[1] != msg("user", "hello") || m[3] != msg("user", persona) || m[4] != msg("user", "hello?") {
		t.Errorf("messages = %+v", m)
	}
	if m[2].Role != "system" || !strings.Contains(m[2].Content, "interrupted") {
		t.Errorf("m[2] = %+v, want the interruption note", m[2])
	}
	for _, x := range m {
		if x.Role == "assistant" {
			t.Errorf("empty interrupted reply sent as an assistant message: %+v", x)
		}
	}
}

// A run of interrupts must not pile notes into the context: each request
// carries one note, after the latest assistant message only, and once the
// model answers normally no note is left at all.
func TestContextInterruptRunThenNormalReply(t *testing.T) {
	a, s := newAgent(t, persona, fakellm.Reply{Tokens: []string{"ok"}})

	a.AddUser("u1")
	_, req := reply(t, a, s)
	if n := notes(req.Messages); len(n) != 0 {
		t.Errorf("first request has notes at %v", n)
	}
	a.AddAssistant("First answ", true)

	a.AddUser("u2")
	_, req = reply(t, a, s)
	checkOneNoteAfter(t, req.Messages, msg("assistant", "First answ"))
	a.AddAssistant("Second", true)

	a.AddUser("u3")
	_, req = reply(t, a, s)
	checkOneNoteAfter(t, req.Messages, msg("assistant", "Second"))
	a.AddAssistant("", true)

	a.AddUser("u4")
	_, req = reply(t, a, s)
	// The empty reply is not sent; its note follows the user message it
	// answered.
	checkOneNoteAfter(t, req.Messages, msg("user", "u3"))
	a.AddAssistant("A full answer.", false)

	a.AddUser("u5")
	_, req = reply(t, a, s)
	want := []fakellm.Message{
		msg("system", wantSystem),
		msg("user", "u1"),
		msg("assistant", "First answ"),
		msg("user", "u2"),
		msg("assistant", "Second"),
		msg("user", "u3"),
		msg("user", "u4"),
		msg("assistant", "A full answer."),
		msg("user", persona),
		msg("user", "u5"),
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages after a normal reply =\n %+v\nwant (no notes)\n %+v", req.Messages, want)
	}
	for _, r := range s.Requests() {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "...") || strings.Contains(m.Content, "…") {
				t.Errorf("message %+v contains an ellipsis", m)
			}
		}
	}
}

// checkOneNoteAfter checks that msgs hold exactly one interruption note,
// right after prev and right before the persona and the final user message.
func checkOneNoteAfter(t *testing.T, msgs []fakellm.Message, prev fakellm.Message) {
	t.Helper()
	n := notes(msgs)
	if len(n) != 1 {
		t.Fatalf("notes at %v, want exactly one: %+v", n, msgs)
	}
	i := n[0]
	if !strings.Contains(msgs[i].Content, "interrupted") {
		t.Errorf("note %q does not say the reply was interrupted", msgs[i].Content)
	}
	if msgs[i-1] != prev {
		t.Errorf("note follows %+v, want %+v", msgs[i-1], prev)
	}
	if i != len(msgs)-3 || msgs[len(msgs)-2] != msg("user", persona) || msgs[len(msgs)-1].Role != "user" {
		t.Errorf("note at %d of %d, want right before the persona and the last user message: %+v", i, len(msgs), msgs)
	}
}

func TestLoadReplacesMemory(t *testing.T) {
	a, s := newAgent(t, persona, fakellm.Reply{Tokens: []string{"ok"}})
	a.SetThread(agent.Thread{ConfUID: "c", HistoryUID: "h-old"})
	a.AddUser("forgotten")
	a.AddAssistant("also forgotten", false)

	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	loaded := []agent.Message{
		{Role: agent.RoleUser, Content: "summarised question", Time: now},
		{Role: agent.RoleAssistant, Content: "summarised answer", Time: now},
		{Role: agent.RoleUser, Content: "old question", Time: now},
		{Role: agent.RoleAssistant, Content: "old answer", Time: now},
	}
	sums := []history.SummaryRecord{{
		ThreadID: "h-new", Turns: []int{1}, TurnLength: 1, OriginalChars: 37, SummaryChars: 22,
		CompressionRate: 0.3, Summary: "Ann asked; Testa said.",
	}}
	a.Load(agent.Thread{ConfUID: "c", HistoryUID: "h-new"}, loaded, sums)
	loaded[2].Content = "mutated after Load"
	sums[0].Summary = "mutated after Load"

	if got := a.Memory(); !reflect.DeepEqual(got, []agent.Message{
		{Role: agent.RoleUser, Content: "summarised question", Time: now},
		{Role: agent.RoleAssistant, Content: "summarised answer", Time: now},
		{Role: agent.RoleUser, Content: "old question", Time: now},
		{Role: agent.RoleAssistant, Content: "old answer", Time: now},
	}) {
		t.Errorf("Memory after Load = %+v", got)
	}
	st := a.State()
	if st.ThreadID != "h-new" || st.Turns != 2 || st.Totals.Summaries != 1 || st.Summaries[0].Summary != "Ann asked; Testa said." {
		t.Errorf("State after Load = %+v", st)
	}
	a.AddUser("new question")
	_, req := reply(t, a, s)
	// Turn 1 is under the summary: it is sent as the summary, never raw.
	want := []fakellm.Message{
		msg("system", wantSystem+"\n\nSummaries of the earlier conversation, oldest first:\n[Turn 1] Ann asked; Testa said."),
		msg("user", "old question"),
		msg("assistant", "old answer"),
		msg("user", persona),
		msg("user", "new question"),
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages =\n %+v\nwant\n %+v", req.Messages, want)
	}

	a.Load(agent.Thread{ConfUID: "c", HistoryUID: "h-empty"}, nil, nil)
	if got := a.Memory(); len(got) != 0 {
		t.Errorf("Memory after Load(nil) = %+v", got)
	}
	if st := a.State(); st.Turns != 0 || len(st.Summaries) != 0 || st.Totals.Summaries != 0 || st.ThreadID != "h-empty" {
		t.Errorf("State after Load(nil) = %+v", st)
	}
}

func TestMemoryReturnsCopy(t *testing.T) {
	a := agent.New(testOptions(nil, persona))
	defer a.Close()
	a.AddUser("hi")
	a.AddAssistant("hello", true)
	m := a.Memory()
	if len(m) != 2 || m[0].Role != agent.RoleUser || m[0].Content != "hi" ||
		m[1].Role != agent.RoleAssistant || m[1].Content != "hello" || !m[1].Interrupted {
		t.Fatalf("Memory = %+v", m)
	}
	if !m[0].Time.Equal(testNow) {
		t.Errorf("AddUser stamped %v, want the agent's clock %v", m[0].Time, testNow)
	}
	m[0].Content = "changed"
	_ = append(m[:1], agent.Message{Role: agent.RoleUser, Content: "overwrites index 1 if shared"})
	again := a.Memory()
	if again[0].Content != "hi" || again[1].Content != "hello" || len(again) != 2 {
		t.Errorf("Memory changed through a returned slice: %+v", again)
	}
}

// Replies of one agent do not leak into another's context.
func TestAgentsDoNotShareMemory(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
	a1 := agent.New(testOptions(clientFor(s), persona))
	a2 := agent.New(testOptions(clientFor(s), persona))
	defer a1.Close()
	defer a2.Close()
	a1.AddUser("secret of a1")
	a2.AddUser("a2 speaking")
	var em tokens
	if err := a2.Reply(testCtx(t), &em); err != nil {
		t.Fatal(err)
	}
	want := []fakellm.Message{msg("system", wantSystem), msg("user", persona), msg("user", "a2 speaking")}
	if got := s.Requests()[0].Messages; !reflect.DeepEqual(got, want) {
		t.Errorf("a2 request = %+v, want %+v", got, want)
	}
	if m := a1.Memory(); len(m) != 1 || m[0].Content != "secret of a1" {
		t.Errorf("a1 memory = %+v", m)
	}
}

// Replacing the system prompt with the persona: the persona is the system
// prompt and no longer a message that moves down.
func TestContextPersonaAsSystem(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
	opts := testOptions(clientFor(s), persona)
	opts.Memory.PersonaAsSystem = true
	a := agent.New(opts)
	defer a.Close()
	a.AddUser("one")
	a.AddAssistant("reply one", false)
	a.AddUser("two")
	_, req := reply(t, a, s)
	want := []fakellm.Message{
		msg("system", persona+"\n\nCurrent date and time: Friday, 14 March 2025, 15:09 UTC."),
		msg("user", "one"),
		msg("assistant", "reply one"),
		msg("user", "two"),
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages =\n %+v\nwant\n %+v", req.Messages, want)
	}
}

// A user-edited system prompt (names filled in) and a reminder as the
// final user message; "" restores the default and removes the reminder.
func TestContextSystemPromptAndReminder(t *testing.T) {
	a, s := newAgent(t, persona, fakellm.Reply{Tokens: []string{"ok"}})
	a.SetSystemPrompt("You are {character}. {human} is listening.")
	a.SetReminder("Remember: answer in one sentence.")
	a.AddUser("hi")
	_, req := reply(t, a, s)
	want := []fakellm.Message{
		msg("system", "You are Testa. Ann is listening.\n\nCurrent date and time: Friday, 14 March 2025, 15:09 UTC."),
		msg("user", persona),
		msg("user", "hi"),
		msg("user", "Remember: answer in one sentence."),
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages =\n %+v\nwant\n %+v", req.Messages, want)
	}
	a.SetSystemPrompt("")
	a.SetReminder("")
	_, req = reply(t, a, s)
	want = []fakellm.Message{msg("system", wantSystem), msg("user", persona), msg("user", "hi")}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("after reset, messages =\n %+v\nwant\n %+v", req.Messages, want)
	}
}

func TestReplyPassesErrorsThrough(t *testing.T) {
	a, _ := newAgent(t, persona, fakellm.Reply{Status: 404})
	a.AddUser("hi")
	var em tokens
	err := a.Reply(testCtx(t), &em)
	le := llmError(t, err)
	if le.Kind != agent.KindNotFound {
		t.Errorf("kind = %v, want KindNotFound", le.Kind)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Reply(ctx, &em); !errors.Is(err, context.Canceled) {
		t.Errorf("Reply with a cancelled ctx = %v, want context.Canceled", err)
	}
}
