package agent_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"koe"
	"koe/agent"
	"koe/bolt"
	"koe/testkit"
	"koe/testkit/fakellm"
)

// --- The fake LLM as the memory tests use it ---

// memLLM is a fake LLM that tells summarisation requests (non-stream, system
// prompt "Summarise the conversation…") from chat requests (streamed) and
// answers them differently.
type memLLM struct {
	*fakellm.Server
	// done is closed when the test ends, before the server closes, so
	// that responders blocked on a gate let go.
	done chan struct{}

	mu        sync.Mutex
	summarize func(fakellm.Request) fakellm.Reply
	chat      func(fakellm.Request) fakellm.Reply
	chatAt    []time.Time // when each chat request arrived
}

func startMemLLM(t *testing.T, summarize func(fakellm.Request) fakellm.Reply) *memLLM {
	t.Helper()
	m := &memLLM{done: make(chan struct{}), summarize: summarize}
	m.Server = startLLM(t, m.respond)
	// Cleanups run last-in first-out: this one before the server closes.
	t.Cleanup(func() { close(m.done) })
	return m
}

func (m *memLLM) respond(req fakellm.Request) fakellm.Reply {
	m.mu.Lock()
	summarize, chat := m.summarize, m.chat
	if !isSummaryRequest(req) {
		m.chatAt = append(m.chatAt, time.Now())
	}
	m.mu.Unlock()
	if isSummaryRequest(req) {
		return summarize(req)
	}
	if chat != nil {
		return chat(req)
	}
	return fakellm.Reply{Tokens: fakellm.Words("Sure, let me think about that.")}
}

func (m *memLLM) setSummarize(f func(fakellm.Request) fakellm.Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.summarize = f
}

func isSummaryRequest(r fakellm.Request) bool {
	return !r.Stream && len(r.Messages) > 0 && r.Messages[0].Role == "system" &&
		strings.HasPrefix(r.Messages[0].Content, "Summarise the conversation")
}

func summaryRequests(s *fakellm.Server) []fakellm.Request {
	var out []fakellm.Request
	for _, r := range s.Requests() {
		if isSummaryRequest(r) {
			out = append(out, r)
		}
	}
	return out
}

var (
	turnLabelRE = regexp.MustCompile(`(?m)^\[Turn (\d+)\]$`)
	targetRE    = regexp.MustCompile(`in at most (\d+) characters`)
)

// summarisedTurns are the turns a summarisation request asks about.
func summarisedTurns(r fakellm.Request) []int {
	var out []int
	for _, m := range r.Messages {
		for _, g := range turnLabelRE.FindAllStringSubmatch(m.Content, -1) {
			n, _ := strconv.Atoi(g[1])
			out = append(out, n)
		}
	}
	return out
}

// summaryTarget is the length a summarisation request asks for.
func summaryTarget(t *testing.T, r fakellm.Request) int {
	t.Helper()
	g := targetRE.FindStringSubmatch(r.Messages[0].Content)
	if g == nil {
		t.Fatalf("summarisation prompt names no target length: %q", r.Messages[0].Content)
	}
	n, _ := strconv.Atoi(g[1])
	return n
}

// resume is the summary the fake LLM writes for a request: it names the
// turns, so tests can tell summaries apart, and is not ASCII, so runes and
// bytes differ.
func resume(r fakellm.Request) string {
	turns := summarisedTurns(r)
	if len(turns) == 0 {
		return "Résumé of nothing."
	}
	return fmt.Sprintf("Résumé of turns %d–%d: Ann plans a trip; Testa advises.", turns[0], turns[len(turns)-1])
}

// instantSummary answers every summarisation request at once.
func instantSummary(r fakellm.Request) fakellm.Reply {
	return fakellm.Reply{Tokens: []string{resume(r)}}
}

// gate holds each summarisation request until the test answers it.
type gate struct {
	arrived chan *held
	done    <-chan struct{}
}

// held is one summarisation request waiting for its answer.
type held struct {
	fakellm.Request
	answer chan fakellm.Reply
}

func newGate(done <-chan struct{}) *gate {
	return &gate{arrived: make(chan *held), done: done}
}

func (g *gate) respond(r fakellm.Request) fakellm.Reply {
	h := &held{Request: r, answer: make(chan fakellm.Reply)}
	select {
	case g.arrived <- h:
	case <-g.done:
		return fakellm.Reply{Status: 503}
	}
	select {
	case rep := <-h.answer:
		return rep
	case <-g.done:
		return fakellm.Reply{Status: 503}
	}
}

// next waits for the next summarisation request to arrive.
func (g *gate) next(t *testing.T) *held {
	t.Helper()
	select {
	case h := <-g.arrived:
		return h
	case <-time.After(guard):
		t.Fatal("no summarisation request arrived")
		return nil
	}
}

// reply answers the held request.
func (h *held) reply(t *testing.T, rep fakellm.Reply) {
	t.Helper()
	select {
	case h.answer <- rep:
	case <-time.After(guard):
		t.Fatal("the summarisation request is no longer waiting for its answer")
	}
}

// --- Conversations ---

// userText and replyText are a turn's messages: long enough that a summary
// target is well above any floor, and not ASCII, so runes and bytes differ.
func userText(n int) string {
	return fmt.Sprintf("Turn %d, Ann: I keep thinking about the trip to Kyōto in spring — the temples, the café by the river, and whether the blossoms will be out by April %d.", n, n)
}

func replyText(n int) string {
	return fmt.Sprintf("Turn %d, Testa: They usually peak in early April, so the %dth should catch them; the Philosopher’s Path is lovely then.", n, n)
}

func runes(s string) int { return utf8.RuneCountInString(s) }

func memoryOptions(llm agent.LLM, mem agent.MemoryConfig) agent.Options {
	opts := testOptions(llm, persona)
	opts.Memory = mem
	return opts
}

// waitIdle waits until no summary is being computed.
func waitIdle(t *testing.T, a *agent.Agent) {
	t.Helper()
	testkit.Eventually(t, "background summaries to finish", func() bool { return a.State().Pending == 0 })
}

// turn runs one plain turn: user message, reply, assistant message.
func turn(t *testing.T, a *agent.Agent, s *fakellm.Server, n int) fakellm.Request {
	t.Helper()
	a.AddUser(userText(n))
	_, req := reply(t, a, s)
	a.AddAssistant(replyText(n), false)
	return req
}

// systemWith is wantSystem followed by summary lines.
func systemWith(lines ...string) string {
	if len(lines) == 0 {
		return wantSystem
	}
	return wantSystem + "\n\nSummaries of the earlier conversation, oldest first:\n" + strings.Join(lines, "\n")
}

// chatWant is the request of turn n with the given summary lines and raw
// earlier turns.
func chatWant(n int, raw []int, lines ...string) []fakellm.Message {
	want := []fakellm.Message{msg("system", systemWith(lines...))}
	for _, k := range raw {
		want = append(want, msg("user", userText(k)), msg("assistant", replyText(k)))
	}
	return append(want, user(persona, userText(n)))
}

func span(first, last int) []int {
	var out []int
	for k := first; k <= last; k++ {
		out = append(out, k)
	}
	return out
}

// summaryPrompt is the conversation part of a summarisation request for
// plain turns.
func summaryPrompt(turns []int) string {
	var b strings.Builder
	for _, k := range turns {
		fmt.Fprintf(&b, "[Turn %d]\nAnn: %s\nTesta: %s\n", k, userText(k), replyText(k))
	}
	return b.String()
}

func plainChars(turns []int) int {
	n := 0
	for _, k := range turns {
		n += runes(userText(k)) + runes(replyText(k))
	}
	return n
}

// --- Sliding summaries ---

// The product design's sliding policy over ten turns: summarisation is due
// at turns 4, 7 and 10, computed in the background as soon as turns 3, 6
// and 9 complete; the context at turns 4, 7 and 10 holds 1, 2 and 3
// summaries and only the current turn raw.
func TestSlidingSummaries(t *testing.T) {
	m := startMemLLM(t, nil)
	g := newGate(m.done)
	m.setSummarize(g.respond)
	opts := memoryOptions(clientFor(m.Server), agent.DefaultMemoryConfig())
	summarised := make(chan agent.MemoryState, 16)
	opts.OnSummary = func(st agent.MemoryState) { summarised <- st }
	a := agent.New(opts)
	t.Cleanup(a.Close)
	a.SetThread(agent.Thread{ConfUID: "c", HistoryUID: "h1"})

	if err := a.SetCompressionRate(0.6); err == nil {
		t.Error("compression rate 0.6 accepted, want an error (the range is [0.1, 0.5])")
	}
	if got := a.State().CompressionRate; got != 0.3 {
		t.Fatalf("compression rate %v, want the default 0.3", got)
	}

	// Summaries in context and raw earlier turns, per turn.
	wantSums := []int{0, 0, 0, 1, 1, 1, 2, 2, 2, 3}
	wantRaw := []int{0, 1, 2, 0, 1, 2, 0, 1, 2, 0}
	// The compression rate changes at run time: each summary uses the rate
	// of the moment it starts.
	rateFrom := map[int]float64{4: 0.5, 7: 0.1}
	var lines []string
	var records []koe.SummaryRecord
	for n := 1; n <= 10; n++ {
		if r, ok := rateFrom[n]; ok {
			if err := a.SetCompressionRate(r); err != nil {
				t.Fatal(err)
			}
		}
		if got := a.State().Totals.Summaries; got != wantSums[n-1] {
			t.Errorf("turn %d: %d summaries before the turn, want %d", n, got, wantSums[n-1])
		}
		a.AddUser(userText(n))
		_, req := reply(t, a, m.Server)

		// What the LLM received: the summaries in the system prompt, the
		// raw turns not summarised, the persona, the current turn.
		raw := span(n-wantRaw[n-1], n-1)
		if want := chatWant(n, raw, lines...); !reflect.DeepEqual(req.Messages, want) {
			t.Errorf("turn %d: the LLM received\n %+v\nwant\n %+v", n, req.Messages, want)
		}
		rep := a.LastContext()
		if rep.Summaries != wantSums[n-1] || rep.RawTurns != wantRaw[n-1] || rep.DroppedTurns != 0 {
			t.Errorf("turn %d: context has %d summaries + %d raw turns (%d dropped), want %d + %d",
				n, rep.Summaries, rep.RawTurns, rep.DroppedTurns, wantSums[n-1], wantRaw[n-1])
		}

		a.AddAssistant(replyText(n), false)
		// Summarisation starts inside AddAssistant, or not at all: the
		// summary request below is only answered once AddAssistant has
		// long returned, so it runs in the background.
		st := a.State()
		if n%3 != 0 {
			if st.Pending != 0 {
				t.Errorf("turn %d: a summary started (%d pending), want none", n, st.Pending)
			}
			continue
		}
		if st.Pending != 1 {
			t.Fatalf("turn %d: %d summaries pending right after the turn, want 1", n, st.Pending)
		}
		h := g.next(t)
		sreq := h.Request
		turns := span(n-2, n)
		if got := summarisedTurns(sreq); !slices.Equal(got, turns) {
			t.Errorf("after turn %d: summarisation asks about turns %v, want %v", n, got, turns)
		}
		if sreq.Stream {
			t.Error("the summarisation request is streamed")
		}
		if len(sreq.Messages) != 2 || sreq.Messages[1].Role != "user" || sreq.Messages[1].Content != summaryPrompt(turns) {
			t.Errorf("summarisation request messages = %+v\nwant the turns as\n%s", sreq.Messages, summaryPrompt(turns))
		}
		rate := a.State().CompressionRate
		original := plainChars(turns)
		if got, want := summaryTarget(t, sreq), int(float64(original)*rate); got != want {
			t.Errorf("after turn %d: summary target %d characters, want int(%d × %v) = %d", n, got, original, rate, want)
		}
		text := resume(sreq)
		h.reply(t, fakellm.Reply{Tokens: fakellm.Words(text)})
		var told agent.MemoryState
		select {
		case told = <-summarised:
		case <-time.After(guard):
			t.Fatal("OnSummary was not called")
		}
		waitIdle(t, a)

		st = a.State()
		// OnSummary was given the memory with the new summary in it.
		if !reflect.DeepEqual(told, st) {
			t.Errorf("OnSummary got\n %+v\nthe memory is\n %+v", told, st)
		}
		if len(st.Summaries) != n/3 {
			t.Fatalf("after turn %d: %d summaries, want %d", n, len(st.Summaries), n/3)
		}
		want := koe.SummaryRecord{
			ThreadID: "h1", Turns: turns, TurnLength: 3,
			OriginalChars: original, SummaryChars: runes(text), CompressionRate: rate,
			Summary: text, CreatedAt: testNow.Format("2006-01-02T15:04:05"),
		}
		if got := st.Summaries[n/3-1]; !reflect.DeepEqual(got, want) {
			t.Errorf("summary record\n %+v\nwant\n %+v", got, want)
		}
		records = append(records, want)
		lines = append(lines, fmt.Sprintf("[Turns %d-%d] %s", n-2, n, text))
	}

	if got := len(summaryRequests(m.Server)); got != 3 {
		t.Errorf("%d summarisation requests, want 3", got)
	}
	st := a.State()
	orig, short := 0, 0
	for _, r := range records {
		orig += r.OriginalChars
		short += r.SummaryChars
	}
	wantTotals := agent.MemoryTotals{Summaries: 3, TurnsCovered: 9, OriginalChars: orig, SummaryChars: short, Saving: 1 - float64(short)/float64(orig)}
	if st.Totals != wantTotals || st.Turns != 10 || st.Policy != agent.PolicySliding || st.ThreadID != "h1" {
		t.Errorf("state = %+v, want totals %+v over 10 turns", st, wantTotals)
	}
	if !reflect.DeepEqual(st.Summaries, records) {
		t.Errorf("summaries = %+v, want %+v", st.Summaries, records)
	}
}

// --- Tool-calling turns ---

// wmsg is a request message as the LLM received it, tool calls included.
type wmsg struct {
	Role, Content, ToolCallID string
	Calls                     string // "id name args" joined by "; "
}

func (w wmsg) String() string {
	return fmt.Sprintf("{%s %q calls[%s] result-of %q}", w.Role, w.Content, w.Calls, w.ToolCallID)
}

// received decodes a request fully, tool calls and ids included, and
// checks the rules every request follows.
func received(t *testing.T, r fakellm.Request, persona, reminder string) []wmsg {
	t.Helper()
	msgs := sentMessages(t, r.Raw)
	for _, p := range validateRequest(msgs, persona, reminder, false) {
		t.Errorf("invalid request: %s", p)
	}
	out := make([]wmsg, len(msgs))
	for i, m := range msgs {
		out[i] = wireOf(m)
	}
	return out
}

func wireOf(m agent.WireMessage) wmsg {
	var calls []string
	for _, c := range m.ToolCalls {
		calls = append(calls, c.ID+" "+c.Name+" "+c.Arguments)
	}
	return wmsg{Role: m.Role, Content: m.Text(), ToolCallID: m.ToolCallID, Calls: strings.Join(calls, "; ")}
}

// toolTurn is one scripted turn: its user message, tool cycles (each an
// assistant message with calls and their results) and final reply.
type toolTurn struct {
	n      int
	cycles [][]agent.Message // [assistant with calls, results...]
}

func weatherCycle(n, cycle int, cities ...string) []agent.Message {
	call := agent.Message{Role: agent.RoleAssistant}
	var results []agent.Message
	for i, city := range cities {
		id := fmt.Sprintf("call_%d_%d_%d", n, cycle, i)
		call.ToolCalls = append(call.ToolCalls, agent.ToolCall{ID: id, Name: "get_weather", Arguments: fmt.Sprintf(`{"city":%q}`, city)})
		results = append(results, agent.Message{Role: agent.RoleTool, ToolCallID: id, Name: "get_weather",
			Content: fmt.Sprintf(`{"city":%q,"forecast":"rain, 12°C","turn":%d}`, city, n)})
	}
	return append([]agent.Message{call}, results...)
}

// wire is how a turn's messages reach the LLM: earlier turns (past) with
// their results replaced.
func (tt toolTurn) wire(past bool, cycles int, final bool) []wmsg {
	out := []wmsg{{Role: "user", Content: userText(tt.n)}}
	for _, cy := range tt.cycles[:cycles] {
		for _, m := range cy {
			w := wireOf(agent.WireMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID})
			for _, c := range m.ToolCalls {
				if w.Calls != "" {
					w.Calls += "; "
				}
				w.Calls += c.ID + " " + c.Name + " " + c.Arguments
			}
			if m.Role == agent.RoleTool && past {
				w.Content = agent.ToolResultGone
			}
			out = append(out, w)
		}
	}
	if final {
		out = append(out, wmsg{Role: "assistant", Content: replyText(tt.n)})
	}
	return out
}

func (tt toolTurn) chars() int {
	n := runes(userText(tt.n)) + runes(replyText(tt.n))
	for _, cy := range tt.cycles {
		for _, m := range cy {
			n += runes(m.Content)
			for _, c := range m.ToolCalls {
				n += runes(c.Name) + runes(c.Arguments)
			}
		}
	}
	return n
}

func (tt toolTurn) messages() int {
	n := 2
	for _, cy := range tt.cycles {
		n += len(cy)
	}
	return n
}

// A ten-turn conversation with tool-calling turns, counted turn by turn:
// turn indices and completeness, the context of every LLM call (earlier
// tool results replaced, their calls kept, the current turn's results
// intact, no orphan), and the summaries of turns with tools.
func TestToolTurnsCountedTurnByTurn(t *testing.T) {
	m := startMemLLM(t, instantSummary)
	a := agent.New(memoryOptions(clientFor(m.Server), agent.DefaultMemoryConfig()))
	t.Cleanup(a.Close)
	a.SetThread(agent.Thread{ConfUID: "c", HistoryUID: "h1"})

	script := make([]toolTurn, 11)
	for n := 1; n <= 10; n++ {
		script[n] = toolTurn{n: n}
	}
	script[2].cycles = [][]agent.Message{weatherCycle(2, 0, "Kyoto")}
	script[3].cycles = [][]agent.Message{weatherCycle(3, 0, "Kyoto", "Osaka")}                   // two calls at once
	script[5].cycles = [][]agent.Message{weatherCycle(5, 0, "Nara"), weatherCycle(5, 1, "Kobe")} // two cycles
	script[6].cycles = [][]agent.Message{weatherCycle(6, 0, "Tokyo")}
	script[8].cycles = [][]agent.Message{weatherCycle(8, 0, "Sapporo", "Sendai")}
	script[10].cycles = [][]agent.Message{weatherCycle(10, 0, "Fukuoka"), weatherCycle(10, 1, "Naha")}

	// checkTurns checks the turns memory holds: n turns, all complete but
	// the last when it is still running, each with its message count.
	checkTurns := func(n, lastMessages int, complete bool) {
		t.Helper()
		turns := agent.SplitTurns(a.Memory())
		if len(turns) != n {
			t.Fatalf("turn %d: memory holds %d turns", n, len(turns))
		}
		for i, tn := range turns {
			want := script[i+1].messages()
			if i == n-1 {
				want = lastMessages
			}
			if tn.Index != i+1 || len(tn.Messages) != want || tn.Complete() != (i < n-1 || complete) {
				t.Errorf("turn %d: turn %d has index %d, %d messages, complete %v; want index %d, %d messages, complete %v",
					n, i+1, tn.Index, len(tn.Messages), tn.Complete(), i+1, want, i < n-1 || complete)
			}
		}
	}

	var lines []string
	for n := 1; n <= 10; n++ {
		tt := script[n]
		// Summaries cover every full group of three turns before this one.
		covered := (n - 1) / 3 * 3
		a.AddUser(userText(n))
		checkTurns(n, 1, false)
		for cycle := 0; ; cycle++ {
			_, req := reply(t, a, m.Server)
			want := []wmsg{{Role: "system", Content: systemWith(lines...)}}
			for k := covered + 1; k < n; k++ {
				want = append(want, script[k].wire(true, len(script[k].cycles), true)...)
			}
			// The persona joins the current user message, right above it.
			current := tt.wire(false, cycle, false)
			current[0].Content = persona + "\n\n" + current[0].Content
			want = append(want, current...)
			if got := received(t, req, persona, ""); !reflect.DeepEqual(got, want) {
				t.Errorf("turn %d, cycle %d: the LLM received\n %v\nwant\n %v", n, cycle+1, got, want)
			}
			rep := a.LastContext()
			if rep.Summaries != covered/3 || rep.RawTurns != n-1-covered {
				t.Errorf("turn %d, cycle %d: %d summaries + %d raw turns, want %d + %d", n, cycle+1, rep.Summaries, rep.RawTurns, covered/3, n-1-covered)
			}
			if cycle == len(tt.cycles) {
				break
			}
			// The model called tools; koe ran them.
			a.Append(tt.cycles[cycle]...)
			checkTurns(n, 1+len(slices.Concat(tt.cycles[:cycle+1]...)), false)
		}
		a.AddAssistant(replyText(n), false)
		checkTurns(n, tt.messages(), true)
		waitIdle(t, a)
		if n%3 == 0 {
			turns := span(n-2, n)
			reqs := summaryRequests(m.Server)
			sreq := reqs[len(reqs)-1]
			if got := summarisedTurns(sreq); !slices.Equal(got, turns) {
				t.Fatalf("after turn %d: summarised %v, want %v", n, got, turns)
			}
			// The summariser sees the tool calls and their results.
			for _, k := range turns {
				for _, cy := range script[k].cycles {
					for _, c := range cy[0].ToolCalls {
						if want := fmt.Sprintf("(Testa called get_weather with %s)", c.Arguments); !strings.Contains(sreq.Messages[1].Content, want) {
							t.Errorf("summarisation request lacks %q", want)
						}
					}
					for _, r := range cy[1:] {
						if want := fmt.Sprintf("(result of get_weather: %s)", r.Content); !strings.Contains(sreq.Messages[1].Content, want) {
							t.Errorf("summarisation request lacks %q", want)
						}
					}
				}
			}
			orig := 0
			for _, k := range turns {
				orig += script[k].chars()
			}
			rec := a.State().Summaries[n/3-1]
			if rec.OriginalChars != orig || !slices.Equal(rec.Turns, turns) || rec.TurnLength != 3 {
				t.Errorf("summary record %+v, want turns %v, original_chars %d", rec, turns, orig)
			}
			if got, want := summaryTarget(t, sreq), int(float64(orig)*0.3); got != want {
				t.Errorf("summary target %d, want %d", got, want)
			}
			lines = append(lines, fmt.Sprintf("[Turns %d-%d] %s", n-2, n, resume(sreq)))
		}
	}
	if got := len(summaryRequests(m.Server)); got != 3 {
		t.Errorf("%d summarisation requests, want 3", got)
	}
	if got := len(chatRequests(m.Server)); got != 10+8 {
		t.Errorf("%d chat requests, want 18 (10 turns, 8 tool cycles)", got)
	}
}

// --- The message-window policy ---

func windowConfig() agent.MemoryConfig {
	return agent.MemoryConfig{Policy: agent.PolicyWindow, MaxMessages: 10, KeepRecent: 5, MaxSummaries: 3, CompressionRate: 0.3}
}

// started counts summaries begun: pending or, with an instant summariser,
// already done.
func started(a *agent.Agent) int {
	st := a.State()
	return st.Pending + st.Totals.Summaries
}

// The window policy at its boundaries: exactly MAX_MESSAGES raw messages
// is not due, one more is; at least KEEP_RECENT newest messages stay raw,
// cut on a turn boundary.
func TestWindowPolicyBoundaries(t *testing.T) {
	t.Run("10 messages not due, 12 due", func(t *testing.T) {
		m := startMemLLM(t, instantSummary)
		a := agent.New(memoryOptions(clientFor(m.Server), windowConfig()))
		t.Cleanup(a.Close)
		for n := 1; n <= 5; n++ {
			turn(t, a, m.Server, n)
			if p := started(a); p != 0 {
				t.Fatalf("after turn %d (%d raw messages): %d summaries started, want none", n, 2*n, p)
			}
		}
		turn(t, a, m.Server, 6)
		if p := started(a); p != 1 {
			t.Fatalf("after turn 6 (12 raw messages): %d summaries started, want 1", p)
		}
		waitIdle(t, a)
		reqs := summaryRequests(m.Server)
		if len(reqs) != 1 || !slices.Equal(summarisedTurns(reqs[0]), []int{1, 2, 3}) {
			t.Fatalf("summarisation requests %d, turns %v; want one, of turns 1-3 (6 newest messages stay raw)", len(reqs), summarisedTurns(reqs[0]))
		}
		req := turn(t, a, m.Server, 7)
		if want := chatWant(7, span(4, 6), "[Turns 1-3] "+resume(reqs[0])); !reflect.DeepEqual(req.Messages, want) {
			t.Errorf("turn 7: the LLM received\n %+v\nwant\n %+v", req.Messages, want)
		}
	})

	t.Run("9 messages not due, 11 due", func(t *testing.T) {
		m := startMemLLM(t, instantSummary)
		a := agent.New(memoryOptions(clientFor(m.Server), windowConfig()))
		t.Cleanup(a.Close)
		// Turn 1 has five messages: user, two calls, two results, reply.
		a.AddUser(userText(1))
		reply(t, a, m.Server)
		a.Append(weatherCycle(1, 0, "Kyoto", "Osaka")...)
		reply(t, a, m.Server)
		a.AddAssistant(replyText(1), false)
		turn(t, a, m.Server, 2)
		turn(t, a, m.Server, 3)
		if p := started(a); p != 0 {
			t.Fatalf("at 9 raw messages: %d summaries started, want none", p)
		}
		turn(t, a, m.Server, 4)
		if p := started(a); p != 1 {
			t.Fatalf("at 11 raw messages: %d summaries started, want 1", p)
		}
		waitIdle(t, a)
		// Keeping turns 2-4 (6 messages) keeps at least 5; turn 1 goes.
		reqs := summaryRequests(m.Server)
		if len(reqs) != 1 || !slices.Equal(summarisedTurns(reqs[0]), []int{1}) {
			t.Fatalf("summarised %v, want turn 1 only", summarisedTurns(reqs[0]))
		}
		req := turn(t, a, m.Server, 5)
		if want := chatWant(5, span(2, 4), "[Turn 1] "+resume(reqs[0])); !reflect.DeepEqual(req.Messages, want) {
			t.Errorf("turn 5: the LLM received\n %+v\nwant\n %+v", req.Messages, want)
		}
	})

	// At most three summaries in context: the oldest leaves the window,
	// and its turns are not sent raw either.
	t.Run("at most 3 summaries", func(t *testing.T) {
		m := startMemLLM(t, instantSummary)
		a := agent.New(memoryOptions(clientFor(m.Server), windowConfig()))
		t.Cleanup(a.Close)
		dueAfter := map[int][]int{6: span(1, 3), 9: span(4, 6), 12: span(7, 9), 15: span(10, 12)}
		for n := 1; n <= 15; n++ {
			before := started(a)
			turn(t, a, m.Server, n)
			want := 0
			if dueAfter[n] != nil {
				want = 1
			}
			if p := started(a) - before; p != want {
				t.Fatalf("after turn %d: %d summaries started, want %d", n, p, want)
			}
			waitIdle(t, a)
			if dueAfter[n] != nil {
				reqs := summaryRequests(m.Server)
				if got := summarisedTurns(reqs[len(reqs)-1]); !slices.Equal(got, dueAfter[n]) {
					t.Fatalf("after turn %d: summarised %v, want %v", n, got, dueAfter[n])
				}
			}
		}
		a.AddUser(userText(16))
		_, req := reply(t, a, m.Server)
		var lines []string
		for _, r := range summaryRequests(m.Server)[1:] {
			turns := summarisedTurns(r)
			lines = append(lines, fmt.Sprintf("[Turns %d-%d] %s", turns[0], turns[2], resume(r)))
		}
		if want := chatWant(16, span(13, 15), lines...); !reflect.DeepEqual(req.Messages, want) {
			t.Errorf("turn 16: the LLM received\n %+v\nwant\n %+v", req.Messages, want)
		}
		for _, msg := range req.Messages {
			for _, k := range span(1, 3) {
				if strings.Contains(msg.Content, userText(k)) || strings.Contains(msg.Content, replyText(k)) || strings.Contains(msg.Content, "turns 1–3") {
					t.Errorf("turn %d (under the summary that left the window) reached the LLM: %q", k, msg.Content)
				}
			}
		}
		rep := a.LastContext()
		if st := a.State(); rep.Summaries != 3 || rep.RawTurns != 3 || st.Totals.Summaries != 4 || st.Totals.TurnsCovered != 12 {
			t.Errorf("context %d summaries + %d raw; state %d summaries covering %d turns; want 3 + 3 of 4 covering 12",
				rep.Summaries, rep.RawTurns, st.Totals.Summaries, st.Totals.TurnsCovered)
		}
	})
}

// A summary that fails while a later one succeeds leaves a gap of raw
// turns in the middle. The next summary must still cover consecutive turns
// only: a record must be storable and its label true.
func TestWindowPolicyGapAfterFailedSummary(t *testing.T) {
	m := startMemLLM(t, nil)
	g := newGate(m.done)
	m.setSummarize(g.respond)
	store := openStore(t)
	thread := newThread(t, store)
	opts := memoryOptions(clientFor(m.Server), windowConfig())
	opts.Store = store
	a := agent.New(opts)
	t.Cleanup(a.Close)
	a.SetThread(thread)

	for n := 1; n <= 6; n++ {
		turn(t, a, m.Server, n)
	}
	first := g.next(t) // turns 1-3, held
	if got := summarisedTurns(first.Request); !slices.Equal(got, span(1, 3)) {
		t.Fatalf("first summary of %v, want 1-3", got)
	}
	for n := 7; n <= 9; n++ {
		turn(t, a, m.Server, n)
	}
	second := g.next(t) // turns 4-6: 12 raw messages besides the pending ones
	if got := summarisedTurns(second.Request); !slices.Equal(got, span(4, 6)) {
		t.Fatalf("second summary of %v, want 4-6", got)
	}
	second.reply(t, fakellm.Reply{Tokens: []string{resume(second.Request)}})
	// Wait until the second summary is done with, not only added: its
	// completion schedules what is due next, and were the first to fail
	// before that, turns 1-3 would be due again at once.
	testkit.Eventually(t, "the second summary", func() bool {
		st := a.State()
		return st.Totals.Summaries == 1 && st.Pending == 1
	})
	first.reply(t, fakellm.Reply{Status: 500, ErrorMessage: "summariser down"})
	waitIdle(t, a)

	// Raw now: turns 1-3 and 7-9. Turn 10 makes 14 raw messages.
	m.setSummarize(instantSummary)
	turn(t, a, m.Server, 10)
	waitIdle(t, a)
	for _, r := range summaryRequests(m.Server) {
		turns := summarisedTurns(r)
		for i := 1; i < len(turns); i++ {
			if turns[i] != turns[i-1]+1 {
				t.Errorf("a summary covers turns %v, which are not consecutive", turns)
			}
		}
	}
	st := a.State()
	stored, err := store.Summaries(t.Context(), thread.ConfUID, thread.HistoryUID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored, st.Summaries) {
		t.Errorf("stored summaries %+v, in memory %+v: a summary was not storable", stored, st.Summaries)
	}
	if st.Totals.TurnsCovered != 6 {
		t.Errorf("summaries cover %d turns, want 6 (1-3 again, 4-6)", st.Totals.TurnsCovered)
	}
}

// --- Restart ---

func openStore(t *testing.T) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "koe.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newThread(t *testing.T, s *bolt.Store) agent.Thread {
	t.Helper()
	uid := koe.NewHistoryUID(time.Now())
	if err := s.CreateWith(t.Context(), "conf1", uid); err != nil {
		t.Fatal(err)
	}
	return agent.Thread{ConfUID: "conf1", HistoryUID: uid}
}

// Summaries are stored with their history and survive a restart: a new
// agent loaded with the history and its summaries uses them and does not
// summarise again.
func TestSummariesSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "koe.db")
	store, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	thread := newThread(t, store)

	m := startMemLLM(t, instantSummary)
	opts := memoryOptions(clientFor(m.Server), agent.DefaultMemoryConfig())
	opts.Store = store
	a := agent.New(opts)
	a.SetThread(thread)
	for n := 1; n <= 7; n++ {
		turn(t, a, m.Server, n)
		waitIdle(t, a)
	}
	before := a.State().Summaries
	memory := a.Memory()
	if len(before) != 2 {
		t.Fatalf("%d summaries before the restart, want 2", len(before))
	}
	a.Close()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sums, err := store.Summaries(t.Context(), thread.ConfUID, thread.HistoryUID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sums, before) {
		t.Fatalf("after the restart the store has\n %+v\nwant\n %+v", sums, before)
	}

	m2 := startMemLLM(t, instantSummary)
	opts = memoryOptions(clientFor(m2.Server), agent.DefaultMemoryConfig())
	opts.Store = store
	b := agent.New(opts)
	defer b.Close()
	b.Load(thread, memory, sums)
	if p := b.State().Pending; p != 0 {
		t.Errorf("loading a summarised history started %d summaries", p)
	}
	a8 := turn(t, b, m2.Server, 8)
	lines := []string{"[Turns 1-3] " + sums[0].Summary, "[Turns 4-6] " + sums[1].Summary}
	if want := chatWant(8, []int{7}, lines...); !reflect.DeepEqual(a8.Messages, want) {
		t.Errorf("after the restart the LLM received\n %+v\nwant\n %+v", a8.Messages, want)
	}
	if rep := b.LastContext(); rep.Summaries != 2 || rep.RawTurns != 1 {
		t.Errorf("context %d summaries + %d raw turns, want 2 + 1", rep.Summaries, rep.RawTurns)
	}
	waitIdle(t, b)
	if n := len(summaryRequests(m2.Server)); n != 0 {
		t.Errorf("the restarted agent sent %d summarisation requests, want none", n)
	}

	// A history loaded with a summary missing catches up in the background.
	c := agent.New(opts)
	defer c.Close()
	c.Load(thread, memory, sums[:1])
	waitIdle(t, c)
	reqs := summaryRequests(m2.Server)
	if len(reqs) != 1 || !slices.Equal(summarisedTurns(reqs[0]), span(4, 6)) {
		t.Fatalf("catching up: %d requests, want one of turns 4-6", len(reqs))
	}
	if st := c.State(); st.Totals.Summaries != 2 {
		t.Errorf("after catching up %d summaries, want 2", st.Totals.Summaries)
	}
}

// --- Slow and failing summarisers ---

// A summariser that takes its time never delays a turn: the next turn's
// request goes out at once with the raw turns instead, and Close stops
// the summary (the LLM server sees the request go away).
func TestSlowSummaryDoesNotDelayTurns(t *testing.T) {
	m := startMemLLM(t, nil)
	g := newGate(m.done)
	m.setSummarize(g.respond)
	a := agent.New(memoryOptions(clientFor(m.Server), agent.DefaultMemoryConfig()))
	closed := false
	t.Cleanup(func() {
		if !closed {
			a.Close()
		}
	})
	for n := 1; n <= 3; n++ {
		turn(t, a, m.Server, n)
	}
	held := g.next(t) // the summary of turns 1-3 arrived and is held

	// Turn 4 goes out while the summary is still being written: raw turns.
	req := turn(t, a, m.Server, 4)
	if want := chatWant(4, span(1, 3)); !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("turn 4: the LLM received\n %+v\nwant the raw turns\n %+v", req.Messages, want)
	}
	if rep := a.LastContext(); rep.Summaries != 0 || rep.RawTurns != 3 {
		t.Errorf("turn 4: %d summaries + %d raw turns, want 0 + 3", rep.Summaries, rep.RawTurns)
	}
	if p := a.State().Pending; p != 1 {
		t.Errorf("%d summaries pending, want the held one", p)
	}

	// The summary arrives; turn 5 uses it.
	held.reply(t, fakellm.Reply{Tokens: []string{resume(held.Request)}})
	waitIdle(t, a)
	req = turn(t, a, m.Server, 5)
	if want := chatWant(5, []int{4}, "[Turns 1-3] "+resume(held.Request)); !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("turn 5: the LLM received\n %+v\nwant\n %+v", req.Messages, want)
	}

	// The next summary hangs for good; Close must not wait for it.
	m.setSummarize(func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Hang: true} })
	turn(t, a, m.Server, 6)
	testkit.Eventually(t, "the hanging summarisation request", func() bool { return len(summaryRequests(m.Server)) == 2 })
	req = turn(t, a, m.Server, 7)
	if rep := a.LastContext(); rep.Summaries != 1 || rep.RawTurns != 3 {
		t.Errorf("turn 7: %d summaries + %d raw turns, want 1 + 3 (4-6 raw while their summary hangs)", rep.Summaries, rep.RawTurns)
	}
	if want := chatWant(7, span(4, 6), "[Turns 1-3] "+resume(held.Request)); !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("turn 7: the LLM received\n %+v\nwant\n %+v", req.Messages, want)
	}
	done := make(chan struct{})
	go func() { a.Close(); close(done) }()
	select {
	case <-done:
		closed = true
	case <-time.After(guard):
		t.Fatal("Close waited for a hanging summary")
	}
	select {
	case <-m.Disconnects():
	case <-time.After(guard):
		t.Fatal("the fake LLM never saw the summarisation request go away")
	}
	if st := a.State(); st.Pending != 0 || st.Totals.Summaries != 1 {
		t.Errorf("after Close: %d pending, %d summaries; want 0 and 1", st.Pending, st.Totals.Summaries)
	}
}

// A failed summarisation (an HTTP error, then an empty answer) never
// breaks a turn and is tried again after the next one.
func TestFailedSummaryIsRetried(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	m := startMemLLM(t, func(r fakellm.Request) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch calls {
		case 1:
			return fakellm.Reply{Status: 500, ErrorMessage: "summariser down"}
		case 2:
			return fakellm.Reply{} // an empty summary is a failure too
		}
		return instantSummary(r)
	})
	a := agent.New(memoryOptions(clientFor(m.Server), agent.DefaultMemoryConfig()))
	t.Cleanup(a.Close)
	for n := 1; n <= 3; n++ {
		turn(t, a, m.Server, n)
	}
	waitIdle(t, a)
	if st := a.State(); st.Totals.Summaries != 0 || len(summaryRequests(m.Server)) != 1 {
		t.Fatalf("after a failed summary: %d summaries, %d requests; want 0, 1", st.Totals.Summaries, len(summaryRequests(m.Server)))
	}
	req := turn(t, a, m.Server, 4) // the turn works, with raw turns
	if want := chatWant(4, span(1, 3)); !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("turn 4: the LLM received\n %+v\nwant\n %+v", req.Messages, want)
	}
	waitIdle(t, a) // retried after turn 4: empty answer
	turn(t, a, m.Server, 5)
	waitIdle(t, a) // retried after turn 5: a summary
	reqs := summaryRequests(m.Server)
	if len(reqs) != 3 {
		t.Fatalf("%d summarisation requests, want 3 (a failure, an empty answer, a success)", len(reqs))
	}
	for i, r := range reqs {
		if got := summarisedTurns(r); !slices.Equal(got, span(1, 3)) {
			t.Errorf("summarisation request %d is about turns %v, want 1-3 each time", i+1, got)
		}
	}
	req = turn(t, a, m.Server, 6)
	if want := chatWant(6, span(4, 5), "[Turns 1-3] "+resume(reqs[2])); !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("turn 6: the LLM received\n %+v\nwant\n %+v", req.Messages, want)
	}
}

// A turn the LLM never answered (the call failed; the conversation adds no
// reply) stays in the history; it must not stop summarising for good.
func TestUnansweredTurnDoesNotStopSummaries(t *testing.T) {
	m := startMemLLM(t, instantSummary)
	a := agent.New(memoryOptions(clientFor(m.Server), agent.DefaultMemoryConfig()))
	t.Cleanup(a.Close)
	turn(t, a, m.Server, 1)
	m.mu.Lock()
	m.chat = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Status: 500} }
	m.mu.Unlock()
	a.AddUser(userText(2))
	var em tokens
	if err := a.Reply(testCtx(t), &em); err == nil {
		t.Fatal("Reply succeeded, want the LLM's error")
	}
	m.mu.Lock()
	m.chat = nil
	m.mu.Unlock()
	for n := 3; n <= 4; n++ {
		turn(t, a, m.Server, n)
		waitIdle(t, a)
	}
	reqs := summaryRequests(m.Server)
	if len(reqs) != 1 || !slices.Equal(summarisedTurns(reqs[0]), span(1, 3)) {
		t.Fatalf("%d summarisation requests; want one, of turns 1-3 (turn 2 unanswered)", len(reqs))
	}
	if !strings.Contains(reqs[0].Messages[1].Content, "[Turn 2]\nAnn: "+userText(2)+"\n[Turn 3]") {
		t.Errorf("the unanswered turn is not summarised as it is: %q", reqs[0].Messages[1].Content)
	}
}

// --- Token budget ---

// plainHistory is n complete turns made by text(k) for user and reply.
func plainHistory(n int, user, reply func(int) string) []agent.Message {
	var msgs []agent.Message
	for k := 1; k <= n; k++ {
		msgs = append(msgs,
			agent.Message{Role: agent.RoleUser, Content: user(k), Time: testNow},
			agent.Message{Role: agent.RoleAssistant, Content: reply(k), Time: testNow})
	}
	return msgs
}

// toWire turns received messages back into the agent's shape for counting.
func toWire(msgs []fakellm.Message) []agent.WireMessage {
	out := make([]agent.WireMessage, len(msgs))
	for i, m := range msgs {
		out[i] = agent.WireMessage{Role: m.Role, Content: m.Content}
	}
	return out
}

// When the history does not fit, the oldest raw turns go, whole, and only
// as many as needed; the system prompt, persona, current turn and reminder
// always stay.
func TestTokenBudgetDropsOldestTurns(t *testing.T) {
	const reminder = "Answer in one sentence."
	tok := agent.NewTokenizer("gpt-4o")
	m := startMemLLM(t, instantSummary)
	opts := memoryOptions(clientFor(m.Server), noSummaries())
	opts.ContextWindow = 1024
	opts.Reminder = reminder
	a := agent.New(opts)
	t.Cleanup(a.Close)
	a.Load(agent.Thread{ConfUID: "c", HistoryUID: "h"}, plainHistory(20, userText, replyText), nil)
	a.AddUser(userText(21))
	_, req := reply(t, a, m.Server)
	rep := a.LastContext()

	budget := 972 // int(1024 × 0.95)
	kept := rep.RawTurns
	if rep.Budget != budget || rep.ContextWindow != 1024 || kept == 0 || kept >= 20 || rep.DroppedTurns != 20-kept {
		t.Fatalf("budget %d of window %d, %d raw turns, %d dropped; want budget %d, some but not all of 20 turns",
			rep.Budget, rep.ContextWindow, kept, rep.DroppedTurns, budget)
	}
	want := chatWant(21, span(21-kept, 20))
	want[len(want)-1] = user(persona, userText(21), reminder)
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("the LLM received\n %+v\nwant the newest %d turns\n %+v", req.Messages, kept, want)
	}
	// The report counts exactly what was sent, within the budget, and no
	// turn was dropped that would have fitted.
	sent := tok.CountMessages(toWire(req.Messages))
	// The system message is counted by parts, which may count a token
	// more at each join (date line, summaries), never fewer.
	if rep.EstimatedTokens < sent || rep.EstimatedTokens > sent+2+rep.Summaries || sent > budget {
		t.Errorf("report estimates %d tokens, the request counts %d, budget %d", rep.EstimatedTokens, sent, budget)
	}
	next := 21 - kept - 1
	nextCost := tok.CountMessage(agent.WireMessage{Role: "user", Content: userText(next)}) +
		tok.CountMessage(agent.WireMessage{Role: "assistant", Content: replyText(next)})
	if sent+nextCost <= budget {
		t.Errorf("turn %d (%d tokens) was dropped although %d + %d fits %d", next, nextCost, sent, nextCost, budget)
	}
	var reported int
	for _, m := range rep.Messages {
		reported += m.Tokens
	}
	if reported+3 != rep.EstimatedTokens {
		t.Errorf("per-message tokens add up to %d (+3 reply priming), estimate %d", reported, rep.EstimatedTokens)
	}
	t.Logf("window 1024: %d of 20 turns kept, %d tokens of %d", kept, sent, budget)

	// A long system prompt is never cut: turns go instead.
	long := strings.Repeat("Speak warmly and keep every promise you made to Ann. ", 60)
	a.SetSystemPrompt(long)
	_, req = reply(t, a, m.Server)
	rep = a.LastContext()
	if !strings.HasPrefix(req.Messages[0].Content, long) || rep.RawTurns >= kept || rep.EstimatedTokens > budget {
		t.Errorf("with a long system prompt: %d raw turns (before %d), %d tokens; the prompt intact: %v",
			rep.RawTurns, kept, rep.EstimatedTokens, strings.HasPrefix(req.Messages[0].Content, long))
	}
	if got := req.Messages[len(req.Messages)-1]; !reflect.DeepEqual(got, user(persona, userText(21), reminder)) {
		t.Errorf("the request ends with %+v, want persona, current message, reminder", got)
	}
	a.SetSystemPrompt("")

	// When even the parts koe never cuts do not fit, nothing is sent.
	before := len(chatRequests(m.Server))
	a.AddAssistant(replyText(21), false)
	a.AddUser(strings.Repeat("Tell me everything about Kyōto. ", 200))
	var em tokens
	err := a.Reply(testCtx(t), &em)
	if !errors.Is(err, agent.ErrContextTooLarge) {
		t.Fatalf("Reply with a message larger than the window = %v, want ErrContextTooLarge", err)
	}
	var le *agent.LLMError
	if errors.As(err, &le) {
		t.Errorf("ErrContextTooLarge is also an LLMError: %v", err)
	}
	if n := len(chatRequests(m.Server)) - before; n != 0 {
		t.Errorf("%d requests sent for a message that cannot fit", n)
	}
}

// chineseText is a turn in Chinese: tiktoken counts it at about one token
// per character or two, while the fake LLM reports a quarter of the
// characters, so its usage says koe overestimates.
func chineseText(n int) string {
	return fmt.Sprintf("第%d轮：我们明天去京都看樱花吧，听说四月初最漂亮，哲学之道和鸭川的风景都很好。", n)
}

// The provider's usage is recorded next to koe's count and calibrates the
// next budget.
func TestTokenBudgetCalibration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		text  func(int) string
		clamp bool
	}{
		{"english", userText, false},
		{"chinese", chineseText, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const answer = "Sure, let me think about that."
			m := startMemLLM(t, instantSummary)
			opts := memoryOptions(clientFor(m.Server, func(c *agent.Config) { c.StreamUsage = true }), noSummaries())
			opts.ContextWindow = 1024
			a := agent.New(opts)
			t.Cleanup(a.Close)
			a.Load(agent.Thread{ConfUID: "c", HistoryUID: "h"}, plainHistory(40, tc.text, tc.text), nil)
			a.AddUser(tc.text(41))

			_, req := reply(t, a, m.Server)
			first := a.LastContext()
			chars := 0
			for _, m := range req.Messages {
				chars += runes(m.Content)
			}
			wantUsage := &agent.Usage{PromptTokens: chars / 4, CompletionTokens: len(fakellm.Words(answer))}
			if first.Calibration != 1 || !reflect.DeepEqual(first.Usage, wantUsage) {
				t.Fatalf("first call: calibration %v, usage %+v; want 1 and %+v", first.Calibration, first.Usage, wantUsage)
			}

			reply(t, a, m.Server)
			second := a.LastContext()
			ratio := float64(wantUsage.PromptTokens) / float64(first.EstimatedTokens)
			want := math.Min(math.Max(ratio, 0.5), 2)
			if second.Calibration != want {
				t.Errorf("second call calibrated by %v, want %d/%d = %v (bounded: %v)", second.Calibration, wantUsage.PromptTokens, first.EstimatedTokens, ratio, want)
			}
			if tc.clamp != (ratio < 0.5) {
				t.Errorf("ratio %v: want it clamped %v for the %s history", ratio, tc.clamp, tc.name)
			}
			if got := int(math.Ceil(float64(second.EstimatedTokens) * second.Calibration)); got > second.Budget {
				t.Errorf("calibrated estimate %d exceeds the budget %d", got, second.Budget)
			}
			// Calibrated down, more of the history fits.
			if want < 1 && second.RawTurns <= first.RawTurns {
				t.Errorf("calibration %v kept %d turns, before %d; want more", want, second.RawTurns, first.RawTurns)
			}
			t.Logf("koe estimated %d tokens, the provider reported %d: calibration %.3f; raw turns %d → %d",
				first.EstimatedTokens, wantUsage.PromptTokens, second.Calibration, first.RawTurns, second.RawTurns)
		})
	}
}

// --- Numbers for the closing note ---

var numbersWords = strings.Fields(`the trip Kyoto spring temples river blossoms April train hotel
	breakfast museum garden tea ceremony ticket weather rain umbrella map bicycle shrine evening
	lantern market noodles friend camera station morning quiet path bridge maple autumn festival`)

// numbersText is deterministic filler of about words words for turn n.
func numbersText(n, salt, words int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Turn %d:", n)
	x := uint32(n*7919 + salt)
	for i := range words {
		x = x*1664525 + 1013904223
		b.WriteString(" ")
		b.WriteString(numbersWords[x>>16%uint32(len(numbersWords))])
		if i%12 == 11 {
			b.WriteString(".")
		}
	}
	return b.String()
}

// numbersSummary answers a summarisation request with exactly as many
// characters as it asks for.
func numbersSummary(r fakellm.Request) fakellm.Reply {
	target := 0
	if g := targetRE.FindStringSubmatch(r.Messages[0].Content); g != nil {
		target, _ = strconv.Atoi(g[1])
	}
	text := []rune(strings.Repeat("Ann and Testa planned the Kyoto trip together. ", target/40+1))
	return fakellm.Reply{Tokens: []string{strings.TrimSpace(string(text[:target]))}}
}

// TestMemoryNumbers runs a scripted 50-turn conversation of about 200
// tokens per turn and logs what each call costs with sliding summaries
// against the full history, how long a turn waits for summaries, and what
// counting tokens costs.
func TestMemoryNumbers(t *testing.T) {
	user := func(n int) string { return numbersText(n, 1, 62) }
	answer := func(n int) string { return numbersText(n, 2, 110) }
	tok := agent.NewTokenizer("gpt-4o")
	perTurn := tok.Count(user(1)) + tok.Count(answer(1))
	if perTurn < 180 || perTurn > 220 {
		t.Fatalf("a turn is %d tokens, want about 200", perTurn)
	}

	type result struct {
		reports  map[int]*agent.ContextReport
		arrive   []time.Duration // AddUser → chat request at the LLM
		inFlight int             // turns that began while a summary was running
		state    agent.MemoryState
	}
	run := func(mem agent.MemoryConfig, waitSummaries bool) result {
		m := startMemLLM(t, numbersSummary)
		opts := memoryOptions(clientFor(m.Server), mem)
		opts.ContextWindow = 128000
		a := agent.New(opts)
		defer a.Close()
		a.SetThread(agent.Thread{ConfUID: "c", HistoryUID: "h"})
		res := result{reports: map[int]*agent.ContextReport{}}
		for n := 1; n <= 50; n++ {
			if a.State().Pending > 0 {
				res.inFlight++
			}
			start := time.Now()
			a.AddUser(user(n))
			var em tokens
			if err := a.Reply(testCtx(t), &em); err != nil {
				t.Fatal(err)
			}
			m.mu.Lock()
			res.arrive = append(res.arrive, m.chatAt[len(m.chatAt)-1].Sub(start))
			m.mu.Unlock()
			res.reports[n] = a.LastContext()
			a.AddAssistant(answer(n), false)
			if waitSummaries {
				waitIdle(t, a)
			}
		}
		waitIdle(t, a)
		res.state = a.State()
		return res
	}
	// fullHistory is what turn n costs when every earlier turn is sent.
	fullHistory := func(n int) *agent.ContextReport {
		m := startMemLLM(t, numbersSummary)
		opts := memoryOptions(clientFor(m.Server), noSummaries())
		opts.ContextWindow = 128000
		a := agent.New(opts)
		defer a.Close()
		a.Load(agent.Thread{ConfUID: "c", HistoryUID: "h"}, plainHistory(n-1, user, answer), nil)
		a.AddUser(user(n))
		reply(t, a, m.Server)
		return a.LastContext()
	}

	sliding := run(agent.DefaultMemoryConfig(), true)
	for _, n := range []int{10, 25, 50} {
		r, full := sliding.reports[n], fullHistory(n)
		wantSums := (n - 1) / 3
		if r.Summaries != wantSums || r.RawTurns != n-1-3*wantSums || full.RawTurns != n-1 {
			t.Errorf("turn %d: %d summaries + %d raw turns (full: %d raw); want %d + %d", n, r.Summaries, r.RawTurns, full.RawTurns, wantSums, n-1-3*wantSums)
		}
		if r.EstimatedTokens >= full.EstimatedTokens {
			t.Errorf("turn %d: %d tokens with summaries, %d with the full history", n, r.EstimatedTokens, full.EstimatedTokens)
		}
		t.Logf("turn %2d: %5d tokens sent with sliding summaries (%2d summaries + %d raw turns) vs %5d with the full history (%.0f%%)",
			n, r.EstimatedTokens, r.Summaries, r.RawTurns, full.EstimatedTokens, 100*float64(r.EstimatedTokens)/float64(full.EstimatedTokens))
	}
	if got := sliding.state.Totals; got.Summaries != 16 || got.TurnsCovered != 48 {
		t.Errorf("after 50 turns: %d summaries covering %d turns, want 16 covering 48", got.Summaries, got.TurnsCovered)
	}
	t.Logf("a turn is %d tokens; %d summaries, %d → %d characters (saving %.0f%%)", perTurn,
		sliding.state.Totals.Summaries, sliding.state.Totals.OriginalChars, sliding.state.Totals.SummaryChars, 100*sliding.state.Totals.Saving)

	if agent.RaceEnabled {
		t.Log("timings skipped under the race detector")
		return
	}
	// Summaries running in the background while the conversation goes on,
	// against no summaries at all.
	none := run(noSummaries(), false)
	concurrent := run(agent.DefaultMemoryConfig(), false)
	if concurrent.state.Totals.Summaries != 16 {
		t.Errorf("with summaries in the background: %d summaries, want 16", concurrent.state.Totals.Summaries)
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	// Turns right after a summary started (4, 7, …, 49) against the others.
	var afterStart []time.Duration
	for i, d := range concurrent.arrive {
		if n := i + 1; n > 3 && n%3 == 1 {
			afterStart = append(afterStart, d)
		}
	}
	t.Logf("AddUser → chat request at the LLM: without summaries median %v (max %v); with background summaries median %v (max %v), turns right after a summary started median %v (max %v); %d of 50 turns began with a summary in flight",
		med(none.arrive), slices.Max(none.arrive), med(concurrent.arrive), slices.Max(concurrent.arrive), med(afterStart), slices.Max(afterStart), concurrent.inFlight)

	// Counting tokens: the full history of turn 50, and one whole build.
	var text strings.Builder
	for n := 1; n <= 50; n++ {
		text.WriteString(user(n))
		text.WriteString(answer(n))
	}
	tokens := tok.Count(text.String())
	const reps = 20
	start := time.Now()
	for i := range reps {
		tok.Count(text.String() + strings.Repeat(" ", i+1)) // unseen text: no cache hit
	}
	per1k := float64(time.Since(start).Nanoseconds()) / reps / float64(tokens) * 1000
	t.Logf("tokenizer: %d tokens in %v, %.0f ns per 1k tokens", tokens, (time.Since(start) / reps).Round(time.Microsecond), per1k)
}

// hookStore runs afterAdd once a summary is stored.
type hookStore struct {
	*bolt.Store
	afterAdd func()
}

func (s *hookStore) AddSummary(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error {
	err := s.Store.AddSummary(ctx, confUID, historyUID, r)
	if s.afterAdd != nil {
		s.afterAdd()
	}
	return err
}

// The client reloads the history (fetch-and-set-history) just as a summary
// is stored: the loaded summaries hold it already, and memory must keep
// one copy, not add it again.
func TestLoadWhileSummaryIsStored(t *testing.T) {
	store := openStore(t)
	thread := newThread(t, store)
	m := startMemLLM(t, instantSummary)
	hs := &hookStore{Store: store}
	opts := memoryOptions(clientFor(m.Server), agent.DefaultMemoryConfig())
	opts.Store = hs
	a := agent.New(opts)
	t.Cleanup(a.Close)
	a.SetThread(thread)
	var once sync.Once
	hs.afterAdd = func() {
		once.Do(func() {
			sums, err := store.Summaries(t.Context(), thread.ConfUID, thread.HistoryUID)
			if err != nil {
				t.Error(err)
			}
			a.Load(thread, a.Memory(), sums)
		})
	}
	for n := 1; n <= 3; n++ {
		turn(t, a, m.Server, n)
	}
	waitIdle(t, a)
	if st := a.State(); st.Totals.Summaries != 1 {
		t.Errorf("%d summaries in memory, want 1: %+v", st.Totals.Summaries, st.Summaries)
	}
	req := turn(t, a, m.Server, 4)
	if want := chatWant(4, nil, "[Turns 1-3] "+resume(summaryRequests(m.Server)[0])); !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("turn 4: the LLM received\n %+v\nwant\n %+v", req.Messages, want)
	}
}
