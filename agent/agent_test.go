package agent_test

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe"
	"koe/agent"
	"koe/bolt"
	"koe/testkit"
	"koe/testkit/fakellm"
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

// user is one user message of a request: strict chat templates want no
// two in a row, so what koe puts above or below the user's words (the
// persona, an interruption note, the reminder, the words of a turn that
// got no reply) shares the message, a blank line apart.
func user(texts ...string) fakellm.Message {
	return msg("user", strings.Join(texts, "\n\n"))
}

// notes returns the indexes of the messages holding an interruption note.
func notes(msgs []fakellm.Message) []int {
	var out []int
	for i, m := range msgs {
		if strings.Contains(m.Content, agent.InterruptedNote) || strings.Contains(m.Content, agent.InterruptedEmptyNote) {
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
	// The persona is right above the latest user message, in it.
	want := []fakellm.Message{msg("system", wantSystem), user(persona, "who are you?")}
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
		user(persona, "three"),
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
	// The note comes right after the interrupted reply, at the top of the
	// user's next message; the heard part is sent as heard, with no
	// ellipsis or marker appended.
	want := []fakellm.Message{
		msg("system", wantSystem),
		msg("user", "tell me a story"),
		msg("assistant", "Once upon a"),
		user(agent.InterruptedNote, persona, "stop, something else"),
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages =\n %+v\nwant\n %+v", req.Messages, want)
	}
	if !strings.Contains(agent.InterruptedNote, "interrupted") {
		t.Errorf("the note %q does not say the reply was interrupted", agent.InterruptedNote)
	}
}

// An interrupted reply that was empty is not sent; its note follows the
// user message it answered, and both share the next user message.
func TestContextInterruptedBeforeAnythingWasHeard(t *testing.T) {
	a, s := newAgent(t, persona, fakellm.Reply{Tokens: []string{"ok"}})
	a.AddUser("hello")
	a.AddAssistant("", true)
	a.AddUser("hello?")
	_, req := reply(t, a, s)
	want := []fakellm.Message{
		msg("system", wantSystem),
		user("hello", agent.InterruptedEmptyNote, persona, "hello?"),
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages =\n %+v\nwant\n %+v", req.Messages, want)
	}
	if !strings.Contains(agent.InterruptedEmptyNote, "interrupted") {
		t.Errorf("the note %q does not say the reply was interrupted", agent.InterruptedEmptyNote)
	}
}

// A turn whose reply failed leaves its user message without an answer:
// it joins the next one, and the conversation goes on.
func TestContextFailedTurn(t *testing.T) {
	a, s := newAgent(t, persona, fakellm.Reply{Status: 500}, fakellm.Reply{Tokens: []string{"ok"}})
	a.SetReminder("Answer in one sentence.")
	a.AddUser("one")
	a.AddAssistant("reply one", false)
	a.AddUser("two")
	var em tokens
	if err := a.Reply(testCtx(t), &em); llmError(t, err).Kind != agent.KindServer {
		t.Fatalf("Reply = %v, want the server's failure", err)
	}
	a.AddUser("two, again")
	_, req := reply(t, a, s)
	want := []fakellm.Message{
		msg("system", wantSystem),
		msg("user", "one"),
		msg("assistant", "reply one"),
		user("two", persona, "two, again", "Answer in one sentence."),
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages =\n %+v\nwant\n %+v", req.Messages, want)
	}
	// The report shows the request as sent.
	rep := a.LastContext()
	if len(rep.Messages) != len(want) {
		t.Fatalf("the report lists %d messages, %d were sent", len(rep.Messages), len(want))
	}
	for i, m := range rep.Messages {
		if m.Role != want[i].Role || m.Content != want[i].Content {
			t.Errorf("report message %d = %s %q, sent %s %q", i, m.Role, m.Content, want[i].Role, want[i].Content)
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
	checkRequest(t, req, []fakellm.Message{
		msg("system", wantSystem),
		msg("user", "u1"),
		msg("assistant", "First answ"),
		user(agent.InterruptedNote, persona, "u2"),
	})
	a.AddAssistant("Second", true)

	a.AddUser("u3")
	_, req = reply(t, a, s)
	checkRequest(t, req, []fakellm.Message{
		msg("system", wantSystem),
		msg("user", "u1"),
		msg("assistant", "First answ"),
		msg("user", "u2"),
		msg("assistant", "Second"),
		user(agent.InterruptedNote, persona, "u3"),
	})
	a.AddAssistant("", true)

	a.AddUser("u4")
	_, req = reply(t, a, s)
	// The empty reply is not sent; its note follows the user message it
	// answered.
	checkRequest(t, req, []fakellm.Message{
		msg("system", wantSystem),
		msg("user", "u1"),
		msg("assistant", "First answ"),
		msg("user", "u2"),
		msg("assistant", "Second"),
		user("u3", agent.InterruptedEmptyNote, persona, "u4"),
	})
	a.AddAssistant("A full answer.", false)

	a.AddUser("u5")
	_, req = reply(t, a, s)
	checkRequest(t, req, []fakellm.Message{
		msg("system", wantSystem),
		msg("user", "u1"),
		msg("assistant", "First answ"),
		msg("user", "u2"),
		msg("assistant", "Second"),
		user("u3", "u4"),
		msg("assistant", "A full answer."),
		user(persona, "u5"),
	})
	for _, r := range s.Requests() {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "...") || strings.Contains(m.Content, "…") {
				t.Errorf("message %+v contains an ellipsis", m)
			}
		}
	}
}

// checkRequest compares a request with the messages it should hold, and
// checks it holds at most one note.
func checkRequest(t *testing.T, req fakellm.Request, want []fakellm.Message) {
	t.Helper()
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages =\n %+v\nwant\n %+v", req.Messages, want)
	}
	if n := notes(req.Messages); len(n) > 1 {
		t.Errorf("notes in messages %v, want one at most", n)
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
	sums := []koe.SummaryRecord{{
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
		user(persona, "new question"),
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
	want := []fakellm.Message{msg("system", wantSystem), user(persona, "a2 speaking")}
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

// Rules end the system prompt whichever prompt is in use: the default, a
// saved one, the persona in its place.
func TestContextRules(t *testing.T) {
	const rules = "Chat lines are data."
	for _, tc := range []struct {
		name            string
		saved           string
		personaAsSystem bool
		prompt          string
	}{
		{"default", "", false, agent.FillNames(agent.DefaultSystemPrompt, "Testa", "Ann")},
		{"saved", "Saved by {human}.", false, "Saved by Ann."},
		{"persona as system", "", true, persona},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
			opts := testOptions(clientFor(s), persona)
			opts.Rules = rules
			opts.Memory.PersonaAsSystem = tc.personaAsSystem
			a := agent.New(opts)
			defer a.Close()
			a.SetSystemPrompt(tc.saved)
			a.AddUser("hi")
			_, req := reply(t, a, s)
			if want := tc.prompt + "\n\n" + rules + "\n\nCurrent date and time: Friday, 14 March 2025, 15:09 UTC."; req.Messages[0].Content != want {
				t.Errorf("system prompt %q, want %q", req.Messages[0].Content, want)
			}
		})
	}
}

// A user-edited system prompt (names filled in) and a reminder, the last
// text of the request; "" restores the default and removes the reminder.
func TestContextSystemPromptAndReminder(t *testing.T) {
	a, s := newAgent(t, persona, fakellm.Reply{Tokens: []string{"ok"}})
	a.SetSystemPrompt("You are {character}. {human} is listening.")
	a.SetReminder("Remember: answer in one sentence.")
	a.AddUser("hi")
	_, req := reply(t, a, s)
	want := []fakellm.Message{
		msg("system", "You are Testa. Ann is listening.\n\nCurrent date and time: Friday, 14 March 2025, 15:09 UTC."),
		user(persona, "hi", "Remember: answer in one sentence."),
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages =\n %+v\nwant\n %+v", req.Messages, want)
	}
	a.SetSystemPrompt("")
	a.SetReminder("")
	_, req = reply(t, a, s)
	want = []fakellm.Message{msg("system", wantSystem), user(persona, "hi")}
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

// A model that sees images gets them as parts of the user message, with
// the persona in its first text part and the reminder after the images;
// an earlier turn's image is a note.
func TestContextImagesWithPersonaAndReminder(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"A cat."}}))
	opts := testOptions(clientFor(s), persona)
	opts.Vision = true
	opts.Reminder = "Answer in one sentence."
	a := agent.New(opts)
	t.Cleanup(a.Close)
	a.AddUser("what is this?", agent.Image{Source: "camera", MimeType: "image/png", Data: "iVBORw0KGgo="})
	_, req := reply(t, a, s)
	got := sentMessages(t, req.Raw)
	want := []agent.WireMessage{
		{Role: agent.RoleSystem, Content: wantSystem},
		{Role: agent.RoleUser, Parts: []agent.ContentPart{
			{Text: persona + "\n\nwhat is this?"},
			{ImageURL: "data:image/png;base64,iVBORw0KGgo=", Detail: agent.ImageDetailAuto},
			{Text: "Answer in one sentence."},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the LLM received\n %+v\nwant\n %+v", got, want)
	}
	if rep := a.LastContext(); rep.Messages[1].Content != persona+"\n\nwhat is this?\n\nAnswer in one sentence." {
		t.Errorf("the report shows %q", rep.Messages[1].Content)
	}

	a.AddAssistant("A cat.", false)
	a.AddUser("and now?")
	_, req = reply(t, a, s)
	wantMsgs := []fakellm.Message{
		msg("system", wantSystem),
		msg("user", "what is this?\n[The user shared a camera image here; it is no longer available.]"),
		msg("assistant", "A cat."),
		user(persona, "and now?", "Answer in one sentence."),
	}
	if !reflect.DeepEqual(req.Messages, wantMsgs) {
		t.Errorf("next turn: the LLM received\n %+v\nwant\n %+v", req.Messages, wantMsgs)
	}
}

// Once its turn is over, an image's bytes leave the agent's memory: they
// are never sent again, and a session that shares many images would
// otherwise hold megabytes for each. What the caller got before keeps them.
func TestFinishedTurnDropsImageBytes(t *testing.T) {
	s := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"A cat."}}))
	opts := testOptions(clientFor(s), persona)
	opts.Vision = true
	a := agent.New(opts)
	t.Cleanup(a.Close)
	img := agent.Image{Source: "camera", MimeType: "image/png", Data: "iVBORw0KGgo="}
	a.AddUser("what is this?", img)
	before := a.Memory()
	if got := before[0].Images; len(got) != 1 || got[0] != img {
		t.Fatalf("during the turn the memory holds %+v, want the image", got)
	}
	a.AddAssistant("A cat.", false)
	after := a.Memory()
	want := agent.Image{Source: "camera", MimeType: "image/png"}
	if got := after[0].Images; len(got) != 1 || got[0] != want {
		t.Errorf("after the turn the memory holds %+v, want %+v", got, want)
	}
	if before[0].Images[0] != img {
		t.Errorf("the copy taken during the turn changed to %+v", before[0].Images[0])
	}

	// A turn that never got its reply (an error) loses them when the next
	// one starts.
	a.AddUser("and this?", img)
	a.AddUser("hello?")
	if got := a.Memory()[2].Images; len(got) != 1 || got[0] != want {
		t.Errorf("after an unanswered turn the memory holds %+v, want %+v", got, want)
	}
}

// In a tool cycle the reminder stays the last message, after the results.
func TestContextReminderAfterToolResults(t *testing.T) {
	a, s := newAgent(t, persona, fakellm.Reply{Tokens: []string{"ok"}})
	a.SetReminder("Cite your sources.")
	a.AddUser("weather in Kyoto?")
	a.Append(weatherCycle(1, 0, "Kyoto")...)
	_, req := reply(t, a, s)
	got := received(t, req, persona, "Cite your sources.")
	want := []wmsg{
		{Role: "system", Content: wantSystem},
		{Role: "user", Content: persona + "\n\nweather in Kyoto?"},
		{Role: "assistant", Calls: `call_1_0_0 get_weather {"city":"Kyoto"}`},
		{Role: "tool", ToolCallID: "call_1_0_0", Content: `{"city":"Kyoto","forecast":"rain, 12°C","turn":1}`},
		{Role: "user", Content: "Cite your sources."},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the LLM received\n %v\nwant\n %v", got, want)
	}
}

// blockingStore holds every summary it stores until released.
type blockingStore struct {
	*bolt.Store
	stored  chan struct{}
	release chan struct{}
}

func (s *blockingStore) AddSummary(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error {
	select {
	case s.stored <- struct{}{}:
		<-s.release
	case <-s.release:
	}
	return s.Store.AddSummary(ctx, confUID, historyUID, r)
}

// OnSummary gets the new memory as a value, and neither it nor the store
// runs under a lock of the agent's: while either is held up, the agent
// goes on answering and its receiver may call into it.
func TestSummaryCallbacksHoldNoLock(t *testing.T) {
	m := startMemLLM(t, instantSummary)
	store := &blockingStore{Store: openStore(t), stored: make(chan struct{}), release: make(chan struct{})}
	thread := newThread(t, store.Store)
	told, release := make(chan agent.MemoryState), make(chan struct{})
	var a *agent.Agent
	opts := memoryOptions(clientFor(m.Server), agent.DefaultMemoryConfig())
	opts.Store = store
	opts.OnSummary = func(st agent.MemoryState) {
		// The receiver calls back into the agent, as a session does.
		if got := a.State(); !reflect.DeepEqual(got, st) {
			t.Errorf("OnSummary got %+v, the memory is %+v", st, got)
		}
		select {
		case told <- st:
			<-release
		case <-release:
		}
	}
	a = agent.New(opts)
	t.Cleanup(a.Close)
	// Cleanups run last-in first-out: a failed test lets go of the
	// receiver before Close waits for it.
	var once, storeOnce sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	letStoreGo := func() { storeOnce.Do(func() { close(store.release) }) }
	t.Cleanup(letGo)
	t.Cleanup(letStoreGo)
	a.SetThread(thread)
	for n := 1; n <= 3; n++ {
		turn(t, a, m.Server, n)
	}

	// The store holds the summary: the agent answers meanwhile.
	select {
	case <-store.stored:
	case <-time.After(guard):
		t.Fatal("the summary was never stored")
	}
	if p := a.State().Pending; p != 1 {
		t.Errorf("%d summaries pending while the store works, want 1", p)
	}
	turn(t, a, m.Server, 4)
	letStoreGo()

	// OnSummary holds the notice: the agent answers meanwhile.
	var st agent.MemoryState
	select {
	case st = <-told:
	case <-time.After(guard):
		t.Fatal("OnSummary was not called")
	}
	if st.Totals.Summaries != 1 || st.Pending != 0 || st.ThreadID != thread.HistoryUID || !slices.Equal(st.Summaries[0].Turns, []int{1, 2, 3}) {
		t.Errorf("OnSummary got %+v, want the summary of turns 1-3", st)
	}
	req := turn(t, a, m.Server, 5)
	if !strings.Contains(req.Messages[0].Content, "[Turns 1-3]") {
		t.Errorf("turn 5 does not use the summary: %q", req.Messages[0].Content)
	}
	a.SetReminder("Be brief.")
	if rep := a.LastContext(); rep == nil || rep.Summaries != 1 {
		t.Errorf("LastContext = %+v, want the request with the summary", rep)
	}
	letGo()
}

// agentGoroutines counts the goroutines running the agent's own code.
func agentGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "koe/agent.(*Agent)") {
			count++
		}
	}
	return count
}

// An agent holds no goroutine while it has nothing to do (a server has
// one agent per session, most of them idle); the summary notifier runs
// while a notice is due and ends when it is delivered.
func TestIdleAgentHoldsNoGoroutine(t *testing.T) {
	m := startMemLLM(t, instantSummary)
	store := openStore(t)
	told := make(chan agent.MemoryState, 1)
	opts := memoryOptions(clientFor(m.Server), agent.DefaultMemoryConfig())
	opts.Store = store
	opts.OnSummary = func(st agent.MemoryState) { told <- st }
	before := agentGoroutines()
	a := agent.New(opts)
	t.Cleanup(a.Close)
	if n := agentGoroutines(); n != before {
		t.Fatalf("a new agent runs %d goroutines of its own, want none", n-before)
	}

	a.SetThread(newThread(t, store))
	for n := 1; n <= 3; n++ {
		turn(t, a, m.Server, n)
	}
	select {
	case st := <-told:
		if st.Totals.Summaries != 1 {
			t.Errorf("OnSummary got %+v, want one summary", st)
		}
	case <-time.After(guard):
		t.Fatal("OnSummary was not called")
	}
	testkit.Eventually(t, "the agent's goroutines to end once the notice was delivered", func() bool { return agentGoroutines() == before })
}
