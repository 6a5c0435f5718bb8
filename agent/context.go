package agent

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"koe"
)

// contextMargin is the share of the context window kept free: token
// counts are estimates for most models.
const contextMargin = 0.05

// Texts the model sees in place of what it no longer gets.
const (
	toolResultGone       = "This tool result is no longer available."
	interruptedNote      = "The user interrupted your previous reply; they heard only the part above. Do not repeat it unless asked."
	interruptedEmptyNote = "The user interrupted your previous reply before hearing any of it."
)

// ErrContextTooLarge means even the parts koe never cuts (system prompt,
// persona, reminder, the current turn) exceed the model's context window.
var ErrContextTooLarge = errors.New("the message does not fit the model's context window")

// ContextReport describes one LLM request: what koe sent and what it cost.
// It is what users inspect to see exactly what the model got.
type ContextReport struct {
	Time             time.Time
	Model            string
	Messages         []ReportMessage // as sent, after joining for alternating roles
	ToolTokens       int
	EstimatedTokens  int // koe's count of the whole request
	Budget           int // input tokens allowed (window less the margin)
	ContextWindow    int
	Calibration      float64 // provider-reported / koe-estimated, applied to the budget
	Summaries        int     // summaries included
	RecallTokens     int     // the memories block (0: none or dropped)
	DocumentTokens   int     // the knowledge base's documents (0: none or dropped)
	RawTurns         int     // earlier turns included verbatim
	DroppedTurns     int
	DroppedSummaries int
	// Usage is what the provider reported for this request, if it did.
	Usage *Usage
}

// ReportMessage is one message of a ContextReport.
type ReportMessage struct {
	Role       string
	Content    string // the text; images are counted in Tokens only
	ToolCalls  []ToolCall
	ToolCallID string
	Tokens     int
}

// Usage is what a provider reported for one request.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
}

// contextParts are the pieces of one request, in the order they are sent.
type contextParts struct {
	system    string              // the system prompt (or the persona replacing it)
	dynamic   string              // per-request parts: date and time, tools
	summaries []koe.SummaryRecord // oldest first, already limited by the policy
	memories  string              // the recall block ("" = none)
	documents string              // the knowledge base's documents JSON ("" = none)
	earlier   []turn              // complete turns not summarised, oldest first
	persona   string              // the custom prompt above the latest user message ("" = none)
	current   []Message           // the current turn: its user message and tool cycle
	reminder  string              // the last user text ("" = none)
	tools     []ToolSpec

	window      int
	calibration float64
	// vision: the model sees images, so the current turn's images are sent
	// as image parts; otherwise each gets a note saying it cannot be seen.
	vision bool

	// lastReply is the turn holding the latest assistant message of the
	// whole history, summarised or not: only its interruption is noted.
	lastReply int
}

// build assembles the request within the budget: it drops the oldest
// earlier turns (whole turns) first, then the oldest summaries, and never
// the system prompt, persona, reminder or current turn. The request's
// roles alternate (see alternate), and the report counts exactly what is
// sent.
func build(tok *Tokenizer, p contextParts) (Request, ContextReport, error) {
	cal := p.calibration
	if cal <= 0 {
		cal = 1
	}
	budget := int(float64(p.window) * (1 - contextMargin))
	cost := func(n int) int { return int(math.Ceil(float64(n) * cal)) }

	// The system message is counted by parts: its date line makes it new
	// text every minute, while its large parts (the prompt, each summary)
	// repeat and hit the tokenizer's cache.
	head := systemTokens(tok, p.system, p.dynamic)
	currentImages := imagesUnseen
	if p.vision {
		currentImages = imagesAsParts
	}
	// What is never cut, in the order sent: the persona right above the
	// latest user message, so it moves down with the conversation instead
	// of fading at the top; the current turn; the reminder last. alternate
	// joins the persona, the user's message and (unless tool results come
	// between) the reminder into one user message.
	var tail []WireMessage
	if p.persona != "" {
		tail = append(tail, WireMessage{Role: RoleUser, Content: p.persona})
	}
	tail = append(tail, wireTurn(p.current, currentImages)...)
	if p.reminder != "" {
		tail = append(tail, WireMessage{Role: RoleUser, Content: p.reminder})
	}
	toolTokens := tok.CountTools(p.tools)
	fixed := head + tok.CountMessages(alternate(tail)) + toolTokens
	if cost(fixed) > budget {
		if room := budget - cost(fixed-toolTokens); toolTokens > 0 && room >= 0 {
			// Without the tools it would fit: say whose they are.
			// koe's own counts throughout, the room too.
			return Request{}, ContextReport{}, &ToolsTooLargeError{Tokens: toolTokens, Room: int(float64(room) / cal), Window: p.window,
				Available: len(p.tools), Groups: groupTools(tok, p.tools)}
		}
		return Request{}, ContextReport{}, fmt.Errorf("%w (%d tokens needed, %d available of a %d-token window)", ErrContextTooLarge, cost(fixed), budget, p.window)
	}
	left := budget - cost(fixed)

	// The memories block comes right after what is never cut: it was
	// chosen for this very message. It goes above the persona, so it
	// moves down with the conversation and the history before it stays
	// a stable prefix for the server's prompt cache. A block the window
	// cannot hold is dropped whole, never the current turn.
	recallTokens := 0
	if p.memories != "" {
		m := WireMessage{Role: RoleUser, Content: p.memories}
		if n := tok.CountMessage(m); cost(n) <= left {
			left -= cost(n)
			recallTokens = n
			tail = append([]WireMessage{m}, tail...)
		}
	}
	// The knowledge base's documents go above the memories: read whole,
	// they are the same every turn, so the prefix up to them stays
	// cacheable too. Like the memories, they were chosen for this message
	// and are dropped whole rather than cut.
	documentTokens := 0
	if p.documents != "" {
		m := WireMessage{Role: RoleUser, Content: p.documents}
		if n := tok.CountMessage(m); cost(n) <= left {
			left -= cost(n)
			documentTokens = n
			tail = append([]WireMessage{m}, tail...)
		}
	}

	// Summaries first: they stand for the oldest part of the conversation
	// at a fraction of its size. Drop the oldest if even they do not fit.
	sums := p.summaries
	for len(sums) > 0 && cost(summaryTokens(tok, sums)) > left {
		sums = sums[1:]
	}
	left -= cost(summaryTokens(tok, sums))

	// Then earlier turns, newest first, as one contiguous suffix. A turn
	// is charged its messages counted apart; joined to a neighbour, a
	// message costs less than that (one message overhead instead of two),
	// so the request built below fits whenever these charges do.
	lastAssistant := lastAssistantIndex(p.earlier)
	if lastAssistant >= 0 && p.earlier[lastAssistant].Index != p.lastReply {
		lastAssistant = -1 // the latest reply is under a summary
	}
	keep := len(p.earlier)
	for keep > 0 {
		t := p.earlier[keep-1]
		n := tok.CountMessages(wireTurn(t.Messages, imagesGone, keep-1 == lastAssistant)) - tokensReplyPrime
		if cost(n) > left {
			break
		}
		left -= cost(n)
		keep--
	}

	system := systemMessage(p.system, p.dynamic, sums)
	systemCost := head + summaryTokens(tok, sums)
	for {
		var body []WireMessage
		for i, t := range p.earlier[keep:] {
			body = append(body, wireTurn(t.Messages, imagesGone, keep+i == lastAssistant)...)
		}
		msgs := append([]WireMessage{system}, alternate(append(body, tail...))...)
		rep := ContextReport{
			ToolTokens:       toolTokens,
			Budget:           budget,
			ContextWindow:    p.window,
			Calibration:      cal,
			Summaries:        len(sums),
			RecallTokens:     recallTokens,
			DocumentTokens:   documentTokens,
			RawTurns:         len(p.earlier) - keep,
			DroppedTurns:     keep,
			DroppedSummaries: len(p.summaries) - len(sums),
			EstimatedTokens:  tokensReplyPrime + toolTokens,
		}
		for i, m := range msgs {
			n := systemCost
			if i > 0 {
				n = tok.CountMessage(m)
			}
			rep.EstimatedTokens += n
			rep.Messages = append(rep.Messages, ReportMessage{
				Role: m.Role, Content: m.Text(), ToolCallID: m.ToolCallID,
				ToolCalls: m.ToolCalls, Tokens: n,
			})
		}
		// Joining should only ever save tokens; should some text count
		// more joined than apart, one more old turn goes rather than the
		// request overflowing. Without earlier turns the request is the
		// fixed parts and summaries, which fit.
		if cost(rep.EstimatedTokens) <= budget || keep == len(p.earlier) {
			return Request{Messages: msgs, Tools: p.tools}, rep, nil
		}
		keep++
	}
}

// systemMessage is the system prompt with its per-request parts and the
// summaries, each labelled with the turns it covers.
func systemMessage(system, dynamic string, sums []koe.SummaryRecord) WireMessage {
	var b strings.Builder
	b.WriteString(system)
	if dynamic != "" {
		b.WriteString("\n\n")
		b.WriteString(dynamic)
	}
	if len(sums) > 0 {
		b.WriteString("\n\nSummaries of the earlier conversation, oldest first:")
		for _, s := range sums {
			b.WriteString("\n")
			b.WriteString(summaryLine(s))
		}
	}
	return WireMessage{Role: RoleSystem, Content: b.String()}
}

// systemTokens is what the system message costs without its summaries
// (summaryTokens adds those): its two parts plus the message overhead.
func systemTokens(tok *Tokenizer, system, dynamic string) int {
	n := tok.CountMessage(WireMessage{Role: RoleSystem, Content: system})
	if dynamic != "" {
		n += tok.Count("\n\n" + dynamic)
	}
	return n
}

func summaryLine(s koe.SummaryRecord) string {
	first, last := s.Turns[0], s.Turns[len(s.Turns)-1]
	if first == last {
		return fmt.Sprintf("[Turn %d] %s", first, s.Summary)
	}
	return fmt.Sprintf("[Turns %d-%d] %s", first, last, s.Summary)
}

func summaryTokens(tok *Tokenizer, sums []koe.SummaryRecord) int {
	n := 0
	for _, s := range sums {
		n += tok.Count("\n" + summaryLine(s))
	}
	if len(sums) > 0 {
		n += tok.Count("\n\nSummaries of the earlier conversation, oldest first:")
	}
	return n
}

// lastAssistantIndex is the index of the earlier turn holding the latest
// assistant message (where an interruption note may go), or -1.
func lastAssistantIndex(turns []turn) int {
	for i := len(turns) - 1; i >= 0; i-- {
		for _, m := range turns[i].Messages {
			if m.Role == RoleAssistant {
				return i
			}
		}
	}
	return -1
}

// wireTurn converts a turn for the request. For an earlier turn (past),
// tool results are replaced by a fixed text (their calls stay), and an
// interrupted final reply gets its note when it is the latest reply
// (noteInterrupt). Calls without results and results without calls are
// left out, so no request ever holds an orphan. The user message is always
// kept, even empty: every turn then starts on the user's side, which is
// what keeps the roles alternating.
func wireTurn(msgs []Message, images imageMode, noteInterrupt ...bool) []WireMessage {
	past := images == imagesGone
	answered := map[string]bool{}
	called := map[string]bool{}
	for _, m := range msgs {
		if m.Role == RoleTool {
			answered[m.ToolCallID] = true
		}
		for _, c := range m.ToolCalls {
			called[c.ID] = true
		}
	}
	out := make([]WireMessage, 0, len(msgs)+1)
	// Pictures tool calls returned follow the cycle's last result (see
	// toolImagesMessage).
	var shown []Message
	for i, m := range msgs {
		if m.Role != RoleTool && len(shown) > 0 {
			out = append(out, toolImagesMessage(shown))
			shown = nil
		}
		switch {
		case m.Role == RoleTool:
			if !called[m.ToolCallID] {
				continue
			}
			if past {
				m.Content = toolResultGone
			}
			if images == imagesAsParts && hasImageBytes(m.Images) {
				shown = append(shown, m)
			}
			m.Images = nil
		case len(m.ToolCalls) > 0:
			calls := m.ToolCalls[:0:0]
			for _, c := range m.ToolCalls {
				if answered[c.ID] {
					calls = append(calls, c)
				}
			}
			m.ToolCalls = calls
			if len(calls) == 0 && m.Content == "" {
				continue
			}
		}
		// A tool result is sent even when empty (a tool may return
		// nothing): dropping it would orphan its call.
		if m.Role == RoleUser || m.Role == RoleTool || m.Content != "" || len(m.ToolCalls) > 0 || len(m.Images) > 0 {
			out = append(out, m.wire(images))
		}
		if m.Interrupted && i == len(msgs)-1 && len(noteInterrupt) > 0 && noteInterrupt[0] {
			note := interruptedNote
			if m.Content == "" {
				note = interruptedEmptyNote
			}
			// Said in the user's turn: a system message in the middle of
			// the conversation is refused by strict chat templates.
			// alternate carries it into the user message that follows.
			out = append(out, WireMessage{Role: RoleUser, Content: note})
		}
	}
	if len(shown) > 0 {
		out = append(out, toolImagesMessage(shown))
	}
	return out
}
