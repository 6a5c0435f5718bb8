package agent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Toolbox is the tools a character may use, as the agent calls them.
type Toolbox interface {
	// Specs describes the tools for the request.
	Specs() []ToolSpec
	// Call runs one call. An error is the tool's failure, told to the
	// model; its message must be short and safe to show.
	Call(ctx context.Context, call ToolCall) (string, error)
}

// Searcher is a Toolbox some of whose tools search: their results are
// numbered documents the model should cite.
type Searcher interface {
	IsSearch(name string) bool
}

// citationNote ends the system prompt, and citationReminder is the last
// user message, of every cycle after a search tool ran in the turn.
const (
	citationNote     = "\n\nCitations: the search results in this turn are numbered documents. When you use one, cite it by its number in square brackets, like [1], right after what it supports; cite nothing else."
	citationReminder = "Cite the documents you used by their number, like [1]."
	documentsNote    = "\n\nCitations: the documents in this conversation are numbered. When you use one, cite it by its number in square brackets, like [1], right after what it supports; cite nothing else."
)

// ToolEmitter is an Emitter that follows tool use, so that clients can
// watch it. Its methods are called from Reply's goroutine, in order.
type ToolEmitter interface {
	Emitter
	// ToolsCalled ends a cycle whose answer was calls: the text streamed
	// since the previous cycle belongs to it, not to the final reply.
	ToolsCalled(calls []ToolCall)
	// ToolStarted and ToolFinished bracket each call; err is the tool's
	// failure (a timeout, an interrupt, the tool's own error).
	ToolStarted(call ToolCall)
	ToolFinished(call ToolCall, result string, err error)
}

// CycleEmitter is an Emitter told when each LLM call of a turn starts and
// how it ended, so that clients can show the calls and what each cost.
// Its methods are called from Reply's goroutine, in order: CycleEnded
// before the cycle's ToolsCalled.
type CycleEmitter interface {
	Emitter
	CycleStarted(cycle int)
	CycleEnded(cycle int, r CycleResult)
}

// CycleResult is how one LLM call ended.
type CycleResult struct {
	// Model is the model the call asked for.
	Model string
	// FinishReason and Usage are what the server reported, if it did.
	FinishReason string
	Usage        *Usage
	// Err is the call's failure (nil: it answered).
	Err error
}

// DefaultToolTimeout bounds one tool call unless tools.timeout says
// otherwise.
const DefaultToolTimeout = 20 * time.Second

// ErrInterrupted is a tool's error when the turn was stopped while it ran.
var ErrInterrupted = errors.New("the user interrupted before the tool finished")

// Reply streams the assistant's answer to the current memory. With tools,
// a turn takes up to MaxCycles LLM calls: a cycle that calls tools runs
// them, adds the calls and their results to memory and goes on; the last
// allowed cycle must answer in text. The caller records the final reply
// with AddAssistant once it knows what the user heard.
func (a *Agent) Reply(ctx context.Context, emit Emitter) error {
	specs, available := a.offeredTools(true)
	watcher, _ := emit.(ToolEmitter)
	cycles, _ := emit.(CycleEmitter)
	searcher, _ := a.opts.Tools.(Searcher)
	searched := false
	memories := a.recall(ctx)
	docs := a.readKnowledge(ctx, emit)
	hasDocs := a.offerDocuments(docs, emit)
	for cycle := 1; ; cycle++ {
		last := cycle >= a.opts.MaxCycles
		note, reminder := toolsNote(specs, last), ""
		switch {
		case searched:
			note += citationNote
			reminder = citationReminder
		case hasDocs:
			note += documentsNote
			reminder = citationReminder
		}
		req, rep, err := a.buildContext(specs, note, reminder, memories, docs)
		if tooLarge := (*ToolsTooLargeError)(nil); errors.As(err, &tooLarge) {
			tooLarge.MaxTools, tooLarge.Available = a.opts.MaxTools, available
		}
		if err != nil {
			return err
		}
		if len(specs) > 0 && last {
			req.ToolChoice = ToolChoiceNone
		}
		var said strings.Builder
		if cycles != nil {
			cycles.CycleStarted(cycle)
		}
		res, err := a.opts.LLM.Stream(ctx, req, func(d string) {
			said.WriteString(d)
			emit.Token(d)
		})
		a.recordUsage(rep, res.Usage)
		if cycles != nil {
			cycles.CycleEnded(cycle, CycleResult{Model: a.opts.Model, FinishReason: res.FinishReason, Usage: res.Usage, Err: err})
		}
		if err != nil || len(res.ToolCalls) == 0 {
			return err
		}
		if len(specs) == 0 || last {
			// Calls nobody offered, or after being told to answer: the
			// model cannot be helped by another cycle.
			return &LLMError{Kind: KindTooManyCycles, Model: a.opts.Model,
				Detail: fmt.Sprintf("it called %s in LLM call %d of the turn, the last allowed (llm.max_cycles %d)", res.ToolCalls[0].Name, cycle, a.opts.MaxCycles)}
		}
		a.add(Message{Role: RoleAssistant, Content: said.String(), ToolCalls: res.ToolCalls, Time: a.opts.Now()})
		if watcher != nil {
			watcher.ToolsCalled(res.ToolCalls)
		}
		for _, c := range res.ToolCalls {
			searched = searched || searcher != nil && searcher.IsSearch(c.Name)
		}
		results := a.runTools(ctx, res.ToolCalls, watcher)
		// Every call gets its result in memory, even after an interrupt:
		// a call without one would break every later request.
		for i, c := range res.ToolCalls {
			a.add(Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: results[i], Time: a.opts.Now()})
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// offeredTools is what a request offers of the toolbox's tools: the first
// MaxTools, koe's own coming first in the list, and how many there are in
// all. With note, a change in what is left out is logged, once.
func (a *Agent) offeredTools(note bool) ([]ToolSpec, int) {
	if a.opts.Tools == nil {
		return nil, 0
	}
	specs := a.opts.Tools.Specs()
	available := len(specs)
	var left []ToolSpec
	if len(specs) > a.opts.MaxTools {
		specs, left = specs[:a.opts.MaxTools], specs[a.opts.MaxTools:]
	}
	if !note {
		return specs, available
	}
	names := make([]string, len(left))
	for i, s := range left {
		names[i] = s.Name
	}
	joined := strings.Join(names, ", ")
	a.mu.Lock()
	changed := a.leftOut != joined
	a.leftOut = joined
	a.mu.Unlock()
	if changed && len(left) > 0 {
		var sources []string
		for _, g := range groupTools(a.opts.Tokenizer, left) {
			sources = append(sources, fmt.Sprintf("%s: %d", g.Source, g.Tools))
		}
		a.log.Warn("tools left out of the requests: there are more than llm.max_tools",
			"max_tools", a.opts.MaxTools, "available", available, "left_out", len(left),
			"from", strings.Join(sources, "; "), "tools", clipNames(joined))
	} else if changed {
		a.log.Info("every tool is offered again", "tools", len(specs))
	}
	return specs, available
}

// clipNames bounds a list of tool names quoted in a log line.
func clipNames(s string) string {
	const limit = 2000
	if len(s) <= limit {
		return s
	}
	cut := strings.LastIndex(s[:limit], ", ")
	if cut < 0 {
		cut = limit
	}
	return s[:cut] + ", …"
}

// toolOutcome is one finished call, by its place in the cycle.
type toolOutcome struct {
	i      int
	result string
	err    error
}

// runTools runs a cycle's calls at once, each within ToolTimeout, and
// returns what the model is told of each, in call order. It returns once
// every call has ended; cancelling ctx cancels them all.
func (a *Agent) runTools(ctx context.Context, calls []ToolCall, watcher ToolEmitter) []string {
	done := make(chan toolOutcome, len(calls))
	for i, c := range calls {
		if watcher != nil {
			watcher.ToolStarted(c)
		}
		go func() {
			callCtx, cancel := context.WithTimeout(ctx, a.opts.ToolTimeout)
			defer cancel()
			result, err := a.opts.Tools.Call(callCtx, c)
			switch {
			case ctx.Err() != nil:
				err = ErrInterrupted
			case err == nil && callCtx.Err() != nil:
				err = callCtx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no answer within %s (tools.timeout)", a.opts.ToolTimeout)
			}
			done <- toolOutcome{i: i, result: result, err: err}
		}()
	}
	results := make([]string, len(calls))
	for range calls {
		o := <-done
		results[o.i] = ToolResultText(o.result, o.err)
		if o.err != nil {
			a.log.Debug("tool failed", "tool", calls[o.i].Name, "err", o.err)
		}
		if watcher != nil {
			watcher.ToolFinished(calls[o.i], o.result, o.err)
		}
	}
	return results
}

// ToolResultText is what the model is told of a call: its result, or
// "Error: <reason>" when it failed.
func ToolResultText(result string, err error) string {
	if err != nil {
		return "Error: " + err.Error()
	}
	return result
}

// toolsNote tells the model which tools it may call in this cycle.
func toolsNote(specs []ToolSpec, last bool) string {
	if len(specs) == 0 {
		return ""
	}
	if last {
		return "\n\nNo more tools can be called in this turn: answer with what you have."
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return "\n\nTools you can call now: " + strings.Join(names, ", ") + "."
}

// JoinToolboxes offers the tools of several boxes as one (nil boxes are
// skipped; none left: nil). A name two boxes both offer goes to the first.
func JoinToolboxes(boxes ...Toolbox) Toolbox {
	var j joined
	for _, b := range boxes {
		if b != nil && !isNilBox(b) {
			j = append(j, b)
		}
	}
	switch len(j) {
	case 0:
		return nil
	case 1:
		return j[0]
	}
	return j
}

// isNilBox catches a typed nil pointer in a Toolbox.
func isNilBox(b Toolbox) bool {
	v := reflect.ValueOf(b)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

type joined []Toolbox

func (j joined) Specs() []ToolSpec {
	var out []ToolSpec
	seen := map[string]bool{}
	for _, b := range j {
		for _, s := range b.Specs() {
			if !seen[s.Name] {
				seen[s.Name] = true
				out = append(out, s)
			}
		}
	}
	return out
}

func (j joined) Call(ctx context.Context, c ToolCall) (string, error) {
	if b := j.owner(c.Name); b != nil {
		return b.Call(ctx, c)
	}
	return "", fmt.Errorf("there is no tool named %q", c.Name)
}

func (j joined) IsSearch(name string) bool {
	s, ok := j.owner(name).(Searcher)
	return ok && s.IsSearch(name)
}

// owner is the first box that offers name.
func (j joined) owner(name string) Toolbox {
	for _, b := range j {
		for _, s := range b.Specs() {
			if s.Name == name {
				return b
			}
		}
	}
	return nil
}
