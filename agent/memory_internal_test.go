package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"koe/history"
	"koe/internal/fakellm"
)

// Texts the model sees in place of what it no longer gets, for the
// external tests.
const (
	ToolResultGone       = toolResultGone
	InterruptedNote      = interruptedNote
	InterruptedEmptyNote = interruptedEmptyNote
)

// ValidateRequest checks the rules every request koe sends must follow,
// whatever the history: the system prompt first and the only system
// message except one interruption note at most; no orphan tool message
// (every tool result answers a call of the assistant message right
// before its block of results, and every call is answered there); the
// persona right above the latest user message (or leading the system
// prompt); the reminder last. It returns the problems found.
func ValidateRequest(msgs []openai.ChatCompletionMessage, persona, reminder string, personaAsSystem bool) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if len(msgs) == 0 || msgs[0].Role != RoleSystem {
		return []string{"the first message is not the system prompt"}
	}
	notes := 0
	for i, m := range msgs[1:] {
		i++
		switch m.Role {
		case RoleSystem:
			notes++
			if m.Content != interruptedNote && m.Content != interruptedEmptyNote {
				fail("system message at %d is not an interruption note: %q", i, m.Content)
			}
			// After a reply, or after the user message or tool results of
			// a turn whose reply was cut off before anything was heard.
			if prev := msgs[i-1]; prev.Role == RoleSystem {
				fail("interruption note at %d follows a %s message", i, prev.Role)
			}
		case RoleUser, RoleAssistant, RoleTool:
		default:
			fail("message %d has role %q", i, m.Role)
		}
	}
	if notes > 1 {
		fail("%d interruption notes, want at most one", notes)
	}

	// Tool blocks: an assistant message with calls, then exactly one
	// result per call, nothing else in between.
	open := map[string]bool{} // calls of the current block not answered yet
	seen := map[string]bool{}
	for i, m := range msgs {
		if m.Role == RoleTool {
			if !open[m.ToolCallID] {
				fail("tool result %d (%q) answers no open call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			fail("message %d (%s) comes before calls %v were answered", i, m.Role, keys(open))
			open = map[string]bool{}
		}
		for _, c := range m.ToolCalls {
			if m.Role != RoleAssistant {
				fail("message %d (%s) carries tool calls", i, m.Role)
			}
			if c.ID == "" || seen[c.ID] {
				fail("tool call id %q at %d is empty or repeated", c.ID, i)
			}
			seen[c.ID] = true
			open[c.ID] = true
		}
	}
	if len(open) > 0 {
		fail("calls %v are never answered", keys(open))
	}

	last := len(msgs) - 1
	if reminder != "" {
		if m := msgs[last]; m.Role != RoleUser || m.Content != reminder {
			fail("the last message is %s %q, want the reminder", m.Role, m.Content)
		}
		last--
	}
	// The latest user message: the current turn's.
	cur := -1
	for i := last; i > 0; i-- {
		if msgs[i].Role == RoleUser {
			cur = i
			break
		}
	}
	personas := 0
	for _, m := range msgs[1:] {
		if persona != "" && m.Role == RoleUser && m.Content == persona {
			personas++
		}
	}
	switch {
	case persona == "":
	case personaAsSystem:
		if !strings.HasPrefix(msgs[0].Content, persona) {
			fail("the system prompt does not start with the persona")
		}
		if personas != 0 {
			fail("the persona is also sent as a user message")
		}
	default:
		if personas != 1 {
			fail("the persona is sent %d times, want once", personas)
		}
		if cur < 2 || msgs[cur-1].Role != RoleUser || msgs[cur-1].Content != persona {
			fail("the persona is not right above the latest user message (at %d)", cur)
		}
	}
	return bad
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// --- The property test ---

// propCase is one random history and the settings to build its context.
type propCase struct {
	msgs            []Message
	current         []Message // the current turn, also at the end of msgs
	turns           int       // earlier turns (complete or not), before the current one
	answered        map[string]bool
	summaries       []history.SummaryRecord
	window          int
	calibration     float64
	system          string
	persona         string
	reminder        string
	personaAsSystem bool
	mem             MemoryConfig
	tools           []openai.Tool
}

var propWords = []string{
	"hello", "weather", "Berlin", "tomorrow", "rain", "the", "a", "and", "is", "was",
	"今天", "天气", "很好", "我们", "🍕", "🎉", "café", "naïve", "42", "3.14", "—", "\n",
	"<|endoftext|>", "<|im_start|>", "<|fim_prefix|>", "{character}", "[Turns 1-3]",
}

func propText(r *rand.Rand, tag string) string {
	n := 1 + r.IntN(30)
	switch r.IntN(20) {
	case 0:
		n = 200 + r.IntN(600) // now and then a very long message
	case 1:
		n = 0
	}
	var b strings.Builder
	b.WriteString(tag)
	for range n {
		b.WriteString(" ")
		b.WriteString(propWords[r.IntN(len(propWords))])
	}
	return b.String()
}

// propToolCycles appends 0..3 tool cycles of turn n, some malformed.
func propToolCycles(r *rand.Rand, c *propCase, n int, msgs []Message) []Message {
	cycles := 0
	if r.IntN(3) == 0 {
		cycles = 1 + r.IntN(3)
	}
	for cy := range cycles {
		var calls []ToolCall
		var results []Message
		for k := range 1 + r.IntN(3) {
			id := fmt.Sprintf("T%dc%d_%d", n, cy, k)
			calls = append(calls, ToolCall{ID: id, Name: "get_weather", Arguments: fmt.Sprintf(`{"city":"C%d_%d"}`, n, k)})
			if r.IntN(8) == 0 {
				continue // a call without its result
			}
			c.answered[id] = true
			results = append(results, Message{Role: RoleTool, ToolCallID: id, Name: "get_weather", Content: propText(r, fmt.Sprintf("R%d:", n))})
		}
		if r.IntN(8) == 0 { // a result without its call
			results = append(results, Message{Role: RoleTool, ToolCallID: fmt.Sprintf("T%dx%d", n, cy), Name: "get_weather", Content: "orphan"})
		}
		if r.IntN(10) == 0 { // a tool that returned nothing
			for i := range results {
				results[i].Content = ""
				break
			}
		}
		r.Shuffle(len(results), func(i, j int) { results[i], results[j] = results[j], results[i] })
		content := ""
		if r.IntN(3) == 0 {
			content = propText(r, fmt.Sprintf("T%d:", n))
		}
		msgs = append(msgs, Message{Role: RoleAssistant, Content: content, ToolCalls: calls})
		msgs = append(msgs, results...)
	}
	return msgs
}

func genPropCase(r *rand.Rand) propCase {
	c := propCase{answered: map[string]bool{}}
	c.turns = r.IntN(30)
	for n := 1; n <= c.turns; n++ {
		c.msgs = append(c.msgs, Message{Role: RoleUser, Content: propText(r, fmt.Sprintf("T%d:", n))})
		c.msgs = propToolCycles(r, &c, n, c.msgs)
		if r.IntN(12) == 0 {
			continue // never answered (the LLM failed): an incomplete earlier turn
		}
		final := Message{Role: RoleAssistant, Content: propText(r, fmt.Sprintf("T%d:", n))}
		if r.IntN(5) == 0 {
			final.Interrupted = true
			if r.IntN(3) == 0 {
				final.Content = ""
			}
		}
		c.msgs = append(c.msgs, final)
	}
	n := c.turns + 1
	c.current = []Message{{Role: RoleUser, Content: propText(r, fmt.Sprintf("T%d:", n))}}
	c.current = propToolCycles(r, &c, n, c.current)
	c.msgs = append(c.msgs, c.current...)

	// Summaries: consecutive, non-overlapping runs of earlier turns.
	for first := 1; first <= c.turns; {
		if r.IntN(3) != 0 {
			first++
			continue
		}
		span := min(1+r.IntN(4), c.turns-first+1)
		turns := make([]int, span)
		for i := range turns {
			turns[i] = first + i
		}
		c.summaries = append(c.summaries, history.SummaryRecord{
			ThreadID: "h", Turns: turns, TurnLength: span, CompressionRate: 0.3,
			Summary: strings.TrimSpace(propText(r, fmt.Sprintf("S%d:", first))) + ".",
		})
		first += span
	}
	r.Shuffle(len(c.summaries), func(i, j int) { c.summaries[i], c.summaries[j] = c.summaries[j], c.summaries[i] })

	c.window = 512 + r.IntN(16384-512+1)
	if r.IntN(3) == 0 { // small windows, where everything competes
		c.window = 512 + r.IntN(1536)
	}
	if r.IntN(2) == 0 {
		c.calibration = 0.5 + 1.5*r.Float64()
	}
	if r.IntN(3) == 0 {
		c.system = propText(r, "SYS {character} and {human}:")
	}
	if r.IntN(4) != 0 {
		c.persona = propText(r, "PERSONA:")
	}
	if r.IntN(3) == 0 {
		c.reminder = propText(r, "REMIND:")
	}
	c.personaAsSystem = r.IntN(4) == 0
	if r.IntN(2) == 0 {
		c.mem = MemoryConfig{Policy: PolicySliding, Every: 1 << 20, MaxSummaries: r.IntN(5), CompressionRate: 0.3}
	} else {
		c.mem = MemoryConfig{Policy: PolicyWindow, MaxMessages: 1 << 20, KeepRecent: 5, MaxSummaries: r.IntN(5), CompressionRate: 0.3}
	}
	for k := range r.IntN(4) {
		c.tools = append(c.tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name:        fmt.Sprintf("tool_%d", k),
			Description: propText(r, "Looks things up:"),
			Parameters:  json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"what to look up"}},"required":["q"]}`),
		}})
	}
	return c
}

// turnOf is the turn a request message belongs to, from the tags the
// generator puts in contents and call ids; 0 for the system prompt,
// persona, reminder and notes.
var tagRE = regexp.MustCompile(`^T(\d+)[:cx]`)

func turnOf(m openai.ChatCompletionMessage) int {
	s := m.Content
	switch {
	case m.Role == RoleTool:
		s = m.ToolCallID
	case len(m.ToolCalls) > 0:
		s = m.ToolCalls[0].ID
	}
	if g := tagRE.FindStringSubmatch(s); g != nil {
		n, _ := strconv.Atoi(g[1])
		return n
	}
	return 0
}

// expectedWire is what a turn of the generated history must look like in
// a request: malformed parts (calls without results, results without
// calls) left out, earlier turns' results replaced, notes not included.
func expectedWire(c *propCase, msgs []Message, past bool) []openai.ChatCompletionMessage {
	called := map[string]bool{}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			called[tc.ID] = true
		}
	}
	var out []openai.ChatCompletionMessage
	for _, m := range msgs {
		switch {
		case m.Role == RoleTool:
			if !called[m.ToolCallID] {
				continue
			}
			w := openai.ChatCompletionMessage{Role: RoleTool, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
			if past {
				w.Content = toolResultGone
			}
			out = append(out, w)
		case len(m.ToolCalls) > 0:
			w := openai.ChatCompletionMessage{Role: RoleAssistant, Content: m.Content}
			for _, tc := range m.ToolCalls {
				if c.answered[tc.ID] {
					w.ToolCalls = append(w.ToolCalls, openai.ToolCall{ID: tc.ID, Type: openai.ToolTypeFunction,
						Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
				}
			}
			if len(w.ToolCalls) > 0 || w.Content != "" {
				out = append(out, w)
			}
		case m.Content != "":
			out = append(out, openai.ChatCompletionMessage{Role: m.Role, Content: m.Content})
		}
	}
	return out
}

// summaryLineRE matches the summaries' lines in the system prompt.
var summaryLineRE = regexp.MustCompile(`(?m)^\[Turns? (\d+)(?:-(\d+))?\] S(\d+):`)

func TestContextProperties(t *testing.T) {
	tok := NewTokenizer("gpt-4o")
	now := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	srv, err := fakellm.Start("127.0.0.1:0", fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client := NewClient(Config{BaseURL: srv.URL(), Model: "m", IdleTimeout: 10 * time.Second}, nil)

	cases := 300
	if RaceEnabled {
		cases = 100
	}
	var stats struct{ ok, tooLarge, droppedTurns, droppedSums, notes, viaLLM int }
	for i := range cases {
		r := rand.New(rand.NewPCG(uint64(i), 0x6b6f65))
		c := genPropCase(r)
		opts := Options{
			LLM: client, Tokenizer: tok, Model: "m", ContextWindow: c.window, Memory: c.mem,
			SystemPrompt: c.system, Persona: c.persona, Reminder: c.reminder,
			CharacterName: "Testa", HumanName: "Ann", Now: func() time.Time { return now },
		}
		opts.Memory.PersonaAsSystem = c.personaAsSystem
		a := New(opts)
		a.Load(Thread{ConfUID: "c", HistoryUID: "h"}, c.msgs, c.summaries)
		a.calibration = c.calibration
		msgs, rep, err := a.buildContext(c.tools)

		// The smallest possible request: no summaries, no earlier turns.
		alone := New(opts)
		alone.Load(Thread{ConfUID: "c", HistoryUID: "h2"}, c.current, nil)
		alone.calibration = c.calibration
		aloneMsgs, aloneRep, aloneErr := alone.buildContext(c.tools)
		a.Close()
		alone.Close()

		cal := c.calibration
		if cal <= 0 {
			cal = 1
		}
		budget := int(float64(c.window) * (1 - contextMargin))
		prefix := fmt.Sprintf("case %d (window %d, calibration %.2f, %d turns, %d summaries)", i, c.window, cal, c.turns, len(c.summaries))
		// The parts koe never cuts, counted independently; the minimal
		// request, when koe builds it, is exactly those parts.
		fixed := fixedByHand(tok, c, now)
		// koe counts the system message by parts (its date line changes
		// every minute, its big parts hit the count cache): it may count a
		// token more at the join, never fewer.
		if aloneErr == nil && (aloneRep.EstimatedTokens < fixed || aloneRep.EstimatedTokens > fixed+1) {
			t.Fatalf("%s: minimal request estimated %d tokens, its parts count %d", prefix, aloneRep.EstimatedTokens, fixed)
		}
		if aloneErr == nil && tok.CountMessages(aloneMsgs)+tok.CountTools(c.tools) != fixed {
			t.Fatalf("%s: minimal request recounts differently", prefix)
		}
		mustFail := int(math.Ceil(float64(fixed)*cal)) > budget
		if err != nil {
			if !errors.Is(err, ErrContextTooLarge) {
				t.Fatalf("%s: error %v, want ErrContextTooLarge or none", prefix, err)
			}
			if !mustFail {
				t.Fatalf("%s: ErrContextTooLarge although the fixed parts (%d tokens) fit the budget %d", prefix, fixed, budget)
			}
			stats.tooLarge++
			continue
		}
		if mustFail {
			t.Fatalf("%s: no error although the fixed parts (%d tokens) exceed the budget %d", prefix, fixed, budget)
		}
		stats.ok++
		if rep.DroppedTurns > 0 {
			stats.droppedTurns++
		}
		if rep.DroppedSummaries > 0 {
			stats.droppedSums++
		}
		for _, p := range ValidateRequest(msgs, c.persona, c.reminder, c.personaAsSystem) {
			t.Errorf("%s: %s", prefix, p)
		}
		checkPropRequest(t, prefix, tok, c, msgs, rep, budget, cal, &stats.notes)
		if t.Failed() {
			dumpRequest(t, msgs)
			t.FailNow()
		}

		// Now and then, through the fake LLM: it receives exactly that.
		if i%20 == 0 {
			before := len(srv.Requests())
			b := New(opts)
			b.Load(Thread{ConfUID: "c", HistoryUID: "h"}, c.msgs, c.summaries)
			b.calibration = c.calibration
			// Reply offers no tools (yet): compare with a build without them.
			msgs, _, err := b.buildContext(nil)
			if err != nil {
				t.Fatalf("%s: without tools: %v", prefix, err)
			}
			err = b.Reply(t.Context(), emitFunc(func(string) {}))
			b.Close()
			if err != nil {
				t.Fatalf("%s: Reply: %v", prefix, err)
			}
			reqs := srv.Requests()
			if len(reqs) != before+1 {
				t.Fatalf("%s: the fake LLM got %d requests, want 1", prefix, len(reqs)-before)
			}
			var body openai.ChatCompletionRequest
			if err := json.Unmarshal(reqs[len(reqs)-1].Raw, &body); err != nil {
				t.Fatal(err)
			}
			if !equalWire(body.Messages, msgs) {
				dumpRequest(t, body.Messages)
				dumpRequest(t, msgs)
				t.Fatalf("%s: the fake LLM received a different request than built", prefix)
			}
			stats.viaLLM++
		}
	}
	t.Logf("%d cases: %d built (%d dropped turns, %d dropped summaries, %d with a note), %d ErrContextTooLarge, %d also sent to the fake LLM",
		cases, stats.ok, stats.droppedTurns, stats.droppedSums, stats.notes, stats.tooLarge, stats.viaLLM)
	// The generator must reach every branch, or the property proves little.
	if stats.tooLarge == 0 || stats.droppedTurns == 0 || stats.droppedSums == 0 || stats.notes == 0 || stats.ok < cases/2 {
		t.Errorf("the random cases miss a branch: %+v", stats)
	}
}

type emitFunc func(string)

func (f emitFunc) Token(d string) { f(d) }

// fixedByHand counts the parts koe never cuts as they would be sent.
func fixedByHand(tok *Tokenizer, c propCase, now time.Time) int {
	system := c.system
	if system == "" {
		system = DefaultSystemPrompt
	}
	system = fillNames(system, "Testa", "Ann")
	msgs := []openai.ChatCompletionMessage{}
	if c.personaAsSystem && c.persona != "" {
		system = c.persona
	} else if c.persona != "" {
		msgs = append(msgs, openai.ChatCompletionMessage{Role: RoleUser, Content: c.persona})
	}
	head := openai.ChatCompletionMessage{Role: RoleSystem,
		Content: system + "\n\nCurrent date and time: " + now.Format("Monday, 2 January 2006, 15:04 MST") + "."}
	msgs = append([]openai.ChatCompletionMessage{head}, msgs...)
	msgs = append(msgs, expectedWire(&c, c.current, false)...)
	if c.reminder != "" {
		msgs = append(msgs, openai.ChatCompletionMessage{Role: RoleUser, Content: c.reminder})
	}
	return tok.CountMessages(msgs) + tok.CountTools(c.tools)
}

func checkPropRequest(t *testing.T, prefix string, tok *Tokenizer, c propCase, msgs []openai.ChatCompletionMessage, rep *ContextReport, budget int, cal float64, notes *int) {
	t.Helper()
	// Within budget, and the report counts what is sent.
	est := tok.CountMessages(msgs) + tok.CountTools(c.tools)
	// Counted by parts, the system message may cost a token more per
	// join (date line, summary header, each summary), never fewer.
	if rep.EstimatedTokens < est || rep.EstimatedTokens > est+2+rep.Summaries {
		t.Errorf("%s: report estimates %d tokens, the request counts %d", prefix, rep.EstimatedTokens, est)
	}
	if rep.Budget != budget || int(math.Ceil(float64(est)*cal)) > budget {
		t.Errorf("%s: %d tokens (×%.2f) for a budget of %d (report: %d)", prefix, est, cal, budget, rep.Budget)
	}

	// The system prompt is whole.
	system := c.system
	if system == "" {
		system = DefaultSystemPrompt
	}
	system = fillNames(system, "Testa", "Ann")
	if c.personaAsSystem && c.persona != "" {
		system = c.persona
	}
	if !strings.HasPrefix(msgs[0].Content, system+"\n\nCurrent date and time: Friday, 14 March 2025, 15:09 UTC.") {
		t.Errorf("%s: the system prompt was cut or changed", prefix)
	}

	// Summaries: the newest of those the policy keeps, oldest first.
	sums := slices.Clone(c.summaries)
	slices.SortFunc(sums, func(a, b history.SummaryRecord) int { return a.Turns[0] - b.Turns[0] })
	max := c.mem.MaxSummaries
	if c.mem.Policy == PolicyWindow && max == 0 {
		max = 3
	}
	kept := sums
	if max > 0 && len(kept) > max {
		kept = kept[len(kept)-max:]
	}
	var gotFirst []int
	for _, g := range summaryLineRE.FindAllStringSubmatch(msgs[0].Content, -1) {
		n, _ := strconv.Atoi(g[1])
		gotFirst = append(gotFirst, n)
	}
	var wantFirst []int
	for _, s := range kept[len(kept)-rep.Summaries:] {
		wantFirst = append(wantFirst, s.Turns[0])
	}
	if !slices.Equal(gotFirst, wantFirst) || rep.Summaries+rep.DroppedSummaries != len(kept) {
		t.Errorf("%s: summaries of turns %v in the request, want %v (report %d + %d dropped of %d kept)",
			prefix, gotFirst, wantFirst, rep.Summaries, rep.DroppedSummaries, len(kept))
	}

	// Earlier turns: never one under a summary; a contiguous newest
	// suffix of the others; each whole, its tool results replaced.
	covered := map[int]bool{}
	for _, s := range c.summaries {
		for _, n := range s.Turns {
			covered[n] = true
		}
	}
	turns := SplitTurns(c.msgs)
	earlier := turns[:len(turns)-1]
	var uncovered []Turn
	for _, tn := range earlier {
		if !covered[tn.Index] {
			uncovered = append(uncovered, tn)
		}
	}
	if rep.RawTurns > len(uncovered) || rep.RawTurns+rep.DroppedTurns != len(uncovered) {
		t.Fatalf("%s: report %d raw + %d dropped turns of %d not summarised", prefix, rep.RawTurns, rep.DroppedTurns, len(uncovered))
	}
	included := uncovered[len(uncovered)-rep.RawTurns:]
	var want []openai.ChatCompletionMessage
	for _, tn := range included {
		want = append(want, expectedWire(&c, tn.Messages, true)...)
	}
	personaMsgs := 0
	if c.persona != "" && !c.personaAsSystem {
		personaMsgs = 1
	}
	var got []openai.ChatCompletionMessage
	noteAt := -1
	body := msgs[1:]
	if c.reminder != "" {
		body = body[:len(body)-1]
	}
	currentWant := expectedWire(&c, c.current, false)
	if len(body) < len(currentWant)+personaMsgs {
		t.Fatalf("%s: the request is shorter than the current turn", prefix)
	}
	split := len(body) - len(currentWant) - personaMsgs
	for i, m := range body[:split] {
		if m.Role == RoleSystem {
			noteAt = i
			continue
		}
		got = append(got, m)
	}
	if !equalWire(got, want) {
		t.Errorf("%s: earlier turns in the request differ from turns %v, whole and in order", prefix, turnIndices(included))
	}
	// The current turn is whole and last (before the reminder), with its
	// tool results intact.
	if !equalWire(body[split+personaMsgs:], currentWant) {
		t.Errorf("%s: the current turn is not whole and last", prefix)
	}
	for _, m := range body[split+personaMsgs:] {
		if turnOf(m) != c.turns+1 {
			t.Errorf("%s: a message of turn %d sits in the current turn %d", prefix, turnOf(m), c.turns+1)
		}
	}

	// The interruption note: only after the latest reply, if it was cut
	// off and is in the request.
	var latest *Turn
	for i := len(earlier) - 1; i >= 0 && latest == nil; i-- {
		for _, m := range earlier[i].Messages {
			if m.Role == RoleAssistant {
				latest = &earlier[i]
				break
			}
		}
	}
	wantNote := latest != nil && !covered[latest.Index] && len(included) > 0 &&
		slices.Contains(turnIndices(included), latest.Index) && latest.Messages[len(latest.Messages)-1].Interrupted
	if wantNote != (noteAt >= 0) {
		t.Errorf("%s: interruption note present %v, want %v", prefix, noteAt >= 0, wantNote)
	}
	if noteAt >= 0 {
		*notes++
		if noteAt == 0 || turnOf(body[noteAt-1]) != latest.Index {
			t.Errorf("%s: the note does not follow the latest reply's turn %d", prefix, latest.Index)
		}
		if noteAt+1 < split && turnOf(body[noteAt+1]) == latest.Index {
			t.Errorf("%s: the note is inside turn %d", prefix, latest.Index)
		}
	}
}

func turnIndices(turns []Turn) []int {
	var out []int
	for _, tn := range turns {
		out = append(out, tn.Index)
	}
	return out
}

// equalWire compares what matters on the wire: roles, contents, calls and
// the ids results answer.
func equalWire(a, b []openai.ChatCompletionMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Role != y.Role || x.Content != y.Content || x.ToolCallID != y.ToolCallID || len(x.ToolCalls) != len(y.ToolCalls) {
			return false
		}
		for j := range x.ToolCalls {
			if x.ToolCalls[j].ID != y.ToolCalls[j].ID || x.ToolCalls[j].Function != y.ToolCalls[j].Function {
				return false
			}
		}
	}
	return true
}

func dumpRequest(t *testing.T, msgs []openai.ChatCompletionMessage) {
	t.Helper()
	for i, m := range msgs {
		var calls []string
		for _, c := range m.ToolCalls {
			calls = append(calls, c.ID)
		}
		content := m.Content
		if len(content) > 60 {
			content = content[:60] + "…"
		}
		t.Logf("  %2d %-9s turn %-3d calls %v result-of %q %q", i, m.Role, turnOf(m), calls, m.ToolCallID, content)
	}
}
