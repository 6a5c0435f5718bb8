package agent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"koe"
	"koe/agent"
	"koe/llm"
	"koe/testkit/fakellm"
)

// --- The property test ---

// propCase is one random history and the settings to build its context.
type propCase struct {
	msgs            []agent.Message
	current         []agent.Message // the current turn, also at the end of msgs
	turns           int             // earlier turns (complete or not), before the current one
	answered        map[string]bool
	summaries       []koe.SummaryRecord
	window          int
	calibration     float64
	system          string
	persona         string
	reminder        string
	personaAsSystem bool
	mem             agent.MemoryConfig
	tools           []agent.ToolSpec
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
func propToolCycles(r *rand.Rand, c *propCase, n int, msgs []agent.Message) []agent.Message {
	cycles := 0
	if r.IntN(3) == 0 {
		cycles = 1 + r.IntN(3)
	}
	for cy := range cycles {
		var calls []agent.ToolCall
		var results []agent.Message
		for k := range 1 + r.IntN(3) {
			id := fmt.Sprintf("T%dc%d_%d", n, cy, k)
			calls = append(calls, agent.ToolCall{ID: id, Name: "get_weather", Arguments: fmt.Sprintf(`{"city":"C%d_%d"}`, n, k)})
			if r.IntN(8) == 0 {
				continue // a call without its result
			}
			c.answered[id] = true
			results = append(results, agent.Message{Role: agent.RoleTool, ToolCallID: id, Name: "get_weather", Content: propText(r, fmt.Sprintf("R%d:", n))})
		}
		if r.IntN(8) == 0 { // a result without its call
			results = append(results, agent.Message{Role: agent.RoleTool, ToolCallID: fmt.Sprintf("T%dx%d", n, cy), Name: "get_weather", Content: "orphan"})
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
		msgs = append(msgs, agent.Message{Role: agent.RoleAssistant, Content: content, ToolCalls: calls})
		msgs = append(msgs, results...)
	}
	return msgs
}

func genPropCase(r *rand.Rand) propCase {
	c := propCase{answered: map[string]bool{}}
	c.turns = r.IntN(30)
	for n := 1; n <= c.turns; n++ {
		c.msgs = append(c.msgs, agent.Message{Role: agent.RoleUser, Content: propText(r, fmt.Sprintf("T%d:", n))})
		c.msgs = propToolCycles(r, &c, n, c.msgs)
		if r.IntN(12) == 0 {
			continue // never answered (the LLM failed): an incomplete earlier turn
		}
		final := agent.Message{Role: agent.RoleAssistant, Content: propText(r, fmt.Sprintf("T%d:", n))}
		if r.IntN(5) == 0 {
			final.Interrupted = true
			if r.IntN(3) == 0 {
				final.Content = ""
			}
		}
		c.msgs = append(c.msgs, final)
	}
	n := c.turns + 1
	c.current = []agent.Message{{Role: agent.RoleUser, Content: propText(r, fmt.Sprintf("T%d:", n))}}
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
		c.summaries = append(c.summaries, koe.SummaryRecord{
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
		c.mem = agent.MemoryConfig{Policy: agent.PolicySliding, Every: 1 << 20, MaxSummaries: r.IntN(5), CompressionRate: 0.3}
	} else {
		c.mem = agent.MemoryConfig{Policy: agent.PolicyWindow, MaxMessages: 1 << 20, KeepRecent: 5, MaxSummaries: r.IntN(5), CompressionRate: 0.3}
	}
	for k := range r.IntN(4) {
		c.tools = append(c.tools, agent.ToolSpec{
			Name:        fmt.Sprintf("tool_%d", k),
			Description: propText(r, "Looks things up:"),
			Parameters:  json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"what to look up"}},"required":["q"]}`),
		})
	}
	return c
}

// tagRE finds the turn a request message belongs to, from the tags the
// generator puts in contents and call ids.
var tagRE = regexp.MustCompile(`^T(\d+)[:cx]`)

func turnOf(m agent.WireMessage) int {
	s := m.Text()
	switch {
	case m.Role == agent.RoleTool:
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
// a request, before joining for alternating roles: malformed parts (calls
// without results, results without calls) left out, earlier turns'
// results replaced, notes not included.
func expectedWire(c *propCase, msgs []agent.Message, past bool) []agent.WireMessage {
	called := map[string]bool{}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			called[tc.ID] = true
		}
	}
	var out []agent.WireMessage
	for _, m := range msgs {
		switch {
		case m.Role == agent.RoleTool:
			if !called[m.ToolCallID] {
				continue
			}
			w := agent.WireMessage{Role: agent.RoleTool, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
			if past {
				w.Content = agent.ToolResultGone
			}
			out = append(out, w)
		case len(m.ToolCalls) > 0:
			w := agent.WireMessage{Role: agent.RoleAssistant, Content: m.Content}
			for _, tc := range m.ToolCalls {
				if c.answered[tc.ID] {
					w.ToolCalls = append(w.ToolCalls, tc)
				}
			}
			if len(w.ToolCalls) > 0 || w.Content != "" {
				out = append(out, w)
			}
		case m.Content != "":
			out = append(out, agent.WireMessage{Role: m.Role, Content: m.Content})
		}
	}
	return out
}

// summaryLineRE matches the summaries' lines in the system prompt.
var summaryLineRE = regexp.MustCompile(`(?m)^\[Turns? (\d+)(?:-(\d+))?\] S(\d+):`)

// TestContextProperties builds the context of random histories (tool
// cycles, malformed calls, failed turns, interruptions, summaries, tiny
// windows) and checks every rule of the design on each, and now and then
// sends it through package llm to a fake LLM that, like llama.cpp with a
// strict chat template, refuses roles that do not alternate.
func TestContextProperties(t *testing.T) {
	tok := agent.NewTokenizer("gpt-4o")
	now := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	srv := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: []string{"ok"}}))
	srv.SetStrictRoles(true)
	client := llm.New(agent.Config{BaseURL: srv.URL(), Model: "m", IdleTimeout: guard}, nil)

	cases := 300
	if agent.RaceEnabled {
		cases = 100
	}
	var stats struct{ ok, tooLarge, droppedTurns, droppedSums, notes, joined, viaLLM int }
	for i := range cases {
		r := rand.New(rand.NewPCG(uint64(i), 0x6b6f65))
		c := genPropCase(r)
		opts := agent.Options{
			LLM: client, Tokenizer: tok, Model: "m", ContextWindow: c.window, Memory: c.mem,
			SystemPrompt: c.system, Persona: c.persona, Reminder: c.reminder,
			CharacterName: "Testa", HumanName: "Ann", Now: func() time.Time { return now },
		}
		opts.Memory.PersonaAsSystem = c.personaAsSystem
		a := agent.New(opts)
		a.Load(agent.Thread{ConfUID: "c", HistoryUID: "h"}, c.msgs, c.summaries)
		a.SetCalibration(c.calibration)
		req, rep, err := a.BuildContext(c.tools)

		// The smallest possible request: no summaries, no earlier turns.
		alone := agent.New(opts)
		alone.Load(agent.Thread{ConfUID: "c", HistoryUID: "h2"}, c.current, nil)
		alone.SetCalibration(c.calibration)
		aloneReq, aloneRep, aloneErr := alone.BuildContext(c.tools)
		a.Close()
		alone.Close()

		cal := c.calibration
		if cal <= 0 {
			cal = 1
		}
		budget := int(float64(c.window) * (1 - agent.ContextMargin))
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
		if aloneErr == nil && tok.CountMessages(aloneReq.Messages)+tok.CountTools(c.tools) != fixed {
			t.Fatalf("%s: minimal request recounts differently", prefix)
		}
		mustFail := int(math.Ceil(float64(fixed)*cal)) > budget
		if err != nil {
			if !errors.Is(err, agent.ErrContextTooLarge) {
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
		msgs := req.Messages
		for _, p := range validateRequest(msgs, c.persona, c.reminder, c.personaAsSystem) {
			t.Errorf("%s: %s", prefix, p)
		}
		if !reflect.DeepEqual(req.Tools, c.tools) {
			t.Errorf("%s: tools %v in the request, want %v", prefix, req.Tools, c.tools)
		}
		checkPropRequest(t, prefix, tok, c, msgs, rep, budget, cal, &stats.notes, &stats.joined)
		if t.Failed() {
			dumpRequest(t, msgs)
			t.FailNow()
		}

		// Now and then, through package llm to the strict fake LLM: it
		// accepts the request and receives exactly what was built.
		if i%20 == 0 {
			before := len(srv.Requests())
			b := agent.New(opts)
			b.Load(agent.Thread{ConfUID: "c", HistoryUID: "h"}, c.msgs, c.summaries)
			b.SetCalibration(c.calibration)
			// Reply offers no tools (yet): compare with a build without them.
			req, _, err := b.BuildContext(nil)
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
			if got := sentMessages(t, reqs[len(reqs)-1].Raw); !equalWire(got, req.Messages) {
				dumpRequest(t, got)
				dumpRequest(t, req.Messages)
				t.Fatalf("%s: the fake LLM received a different request than built", prefix)
			}
			stats.viaLLM++
		}
	}
	t.Logf("%d cases: %d built (%d dropped turns, %d dropped summaries, %d with a note, %d joining an earlier turn's user text), %d ErrContextTooLarge, %d also sent to the fake LLM",
		cases, stats.ok, stats.droppedTurns, stats.droppedSums, stats.notes, stats.joined, stats.tooLarge, stats.viaLLM)
	// The generator must reach every branch, or the property proves little.
	if stats.tooLarge == 0 || stats.droppedTurns == 0 || stats.droppedSums == 0 || stats.notes == 0 || stats.joined == 0 || stats.ok < cases/2 {
		t.Errorf("the random cases miss a branch: %+v", stats)
	}
}

type emitFunc func(string)

func (f emitFunc) Token(d string) { f(d) }

// systemByHand is the system prompt of a generated case.
func systemByHand(c propCase) string {
	system := c.system
	if system == "" {
		system = agent.DefaultSystemPrompt
	}
	system = agent.FillNames(system, "Testa", "Ann")
	if c.personaAsSystem && c.persona != "" {
		system = c.persona
	}
	return system
}

// tailByHand is what is never cut, in order, before joining: the persona,
// the current turn, the reminder.
func tailByHand(c propCase) []agent.WireMessage {
	var tail []agent.WireMessage
	if c.persona != "" && !c.personaAsSystem {
		tail = append(tail, agent.WireMessage{Role: agent.RoleUser, Content: c.persona})
	}
	tail = append(tail, expectedWire(&c, c.current, false)...)
	if c.reminder != "" {
		tail = append(tail, agent.WireMessage{Role: agent.RoleUser, Content: c.reminder})
	}
	return tail
}

// fixedByHand counts the parts koe never cuts as they would be sent.
func fixedByHand(tok *agent.Tokenizer, c propCase, now time.Time) int {
	head := agent.WireMessage{Role: agent.RoleSystem,
		Content: systemByHand(c) + "\n\nCurrent date and time: " + now.Format("Monday, 2 January 2006, 15:04 MST") + "." + agent.ToolsNote(c.tools, false)}
	msgs := append([]agent.WireMessage{head}, joinByHand(tailByHand(c))...)
	return tok.CountMessages(msgs) + tok.CountTools(c.tools)
}

func checkPropRequest(t *testing.T, prefix string, tok *agent.Tokenizer, c propCase, msgs []agent.WireMessage, rep *agent.ContextReport, budget int, cal float64, notes, joined *int) {
	t.Helper()
	// Within budget, and the report counts what is sent.
	est := tok.CountMessages(msgs) + tok.CountTools(c.tools)
	// Counted by parts, the system message may cost a token more per
	// join (date line, summary header, each summary), never fewer.
	if rep.EstimatedTokens < est || rep.EstimatedTokens > est+2+rep.Summaries {
		t.Errorf("%s: report estimates %d tokens, the request counts %d", prefix, rep.EstimatedTokens, est)
	}
	if rep.Budget != budget || int(math.Ceil(float64(rep.EstimatedTokens)*cal)) > budget {
		t.Errorf("%s: %d tokens (×%.2f) for a budget of %d (report: %d)", prefix, rep.EstimatedTokens, cal, budget, rep.Budget)
	}
	if len(rep.Messages) != len(msgs) {
		t.Fatalf("%s: the report lists %d messages, the request has %d", prefix, len(rep.Messages), len(msgs))
	}
	sum := 0
	for i, m := range rep.Messages {
		sum += m.Tokens
		if m.Role != msgs[i].Role || m.Content != msgs[i].Text() || m.ToolCallID != msgs[i].ToolCallID || !slices.Equal(m.ToolCalls, msgs[i].ToolCalls) {
			t.Errorf("%s: report message %d is not the message sent", prefix, i)
		}
		if i > 0 && m.Tokens != tok.CountMessage(msgs[i]) {
			t.Errorf("%s: report message %d costs %d tokens, the message sent %d", prefix, i, m.Tokens, tok.CountMessage(msgs[i]))
		}
	}
	if sum+3+rep.ToolTokens != rep.EstimatedTokens {
		t.Errorf("%s: per-message tokens add up to %d (+3 reply priming, +%d tools), estimate %d", prefix, sum, rep.ToolTokens, rep.EstimatedTokens)
	}

	// The system prompt is whole.
	if !strings.HasPrefix(msgs[0].Content, systemByHand(c)+"\n\nCurrent date and time: Friday, 14 March 2025, 15:09 UTC.") {
		t.Errorf("%s: the system prompt was cut or changed", prefix)
	}

	// Summaries: the newest of those the policy keeps, oldest first.
	sums := slices.Clone(c.summaries)
	slices.SortFunc(sums, func(a, b koe.SummaryRecord) int { return a.Turns[0] - b.Turns[0] })
	max := c.mem.MaxSummaries
	if c.mem.Policy == agent.PolicyWindow && max == 0 {
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
	// suffix of the others; each whole, its tool results replaced. The
	// latest reply, if it was cut off and is sent, is followed by the
	// interruption note. Then the persona, the current turn whole with
	// its tool results, the reminder; joined where roles would repeat.
	covered := map[int]bool{}
	for _, s := range c.summaries {
		for _, n := range s.Turns {
			covered[n] = true
		}
	}
	turns := agent.SplitTurns(c.msgs)
	earlier := turns[:len(turns)-1]
	var uncovered []agent.Turn
	for _, tn := range earlier {
		if !covered[tn.Index] {
			uncovered = append(uncovered, tn)
		}
	}
	if rep.RawTurns > len(uncovered) || rep.RawTurns+rep.DroppedTurns != len(uncovered) {
		t.Fatalf("%s: report %d raw + %d dropped turns of %d not summarised", prefix, rep.RawTurns, rep.DroppedTurns, len(uncovered))
	}
	included := uncovered[len(uncovered)-rep.RawTurns:]
	latest := -1 // the turn holding the latest reply of the whole history
	for i := len(earlier) - 1; i >= 0 && latest < 0; i-- {
		for _, m := range earlier[i].Messages {
			if m.Role == agent.RoleAssistant {
				latest = earlier[i].Index
				break
			}
		}
	}
	var logical []agent.WireMessage
	for _, tn := range included {
		logical = append(logical, expectedWire(&c, tn.Messages, true)...)
		if final := tn.Messages[len(tn.Messages)-1]; tn.Index == latest && final.Interrupted && final.Role == agent.RoleAssistant {
			note := agent.InterruptedNote
			if final.Content == "" {
				note = agent.InterruptedEmptyNote
			}
			logical = append(logical, agent.WireMessage{Role: agent.RoleUser, Content: note})
			*notes++
		}
	}
	if n := len(logical); n > 0 && logical[n-1].Role == agent.RoleUser {
		*joined++ // an earlier turn's user text (or a note) joins the current one
	}
	want := joinByHand(append(logical, tailByHand(c)...))
	if !equalWire(msgs[1:], want) {
		t.Errorf("%s: the request differs from turns %v whole and in order, then the current turn %d", prefix, turnIndices(included), c.turns+1)
		dumpRequest(t, want)
	}
}

func turnIndices(turns []agent.Turn) []int {
	var out []int
	for _, tn := range turns {
		out = append(out, tn.Index)
	}
	return out
}

func dumpRequest(t *testing.T, msgs []agent.WireMessage) {
	t.Helper()
	for i, m := range msgs {
		var calls []string
		for _, c := range m.ToolCalls {
			calls = append(calls, c.ID)
		}
		content := m.Text()
		if len(content) > 60 {
			content = content[:60] + "…"
		}
		t.Logf("  %2d %-9s turn %-3d calls %v result-of %q %q", i, m.Role, turnOf(m), calls, m.ToolCallID, content)
	}
}
