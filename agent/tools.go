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

// DefaultToolTimeout bounds one tool call unless tools.timeout says
// otherwise.
const DefaultToolTimeout = 20 * time.Second

// ErrInterrupted is a tool's error when the turn was stopped while it ran.
var ErrInterrupted = errors.New("the user interrupted before the tool finished")

// offeredTools is what a request offers of the toolbox's tools: the first
// MaxTools less reserved (the client's own tools take that room), koe's
// own coming first in the list, and how many there are in all. With note,
// a change in what is left out is logged, once.
func (a *Agent) offeredTools(note bool, reserved int) ([]ToolSpec, int) {
	if a.opts.Tools == nil {
		return nil, 0
	}
	specs := a.opts.Tools.Specs()
	available := len(specs)
	room := max(a.opts.MaxTools-reserved, 0)
	var left []ToolSpec
	if len(specs) > room {
		specs, left = specs[:room], specs[room:]
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

// toolRun is what a cycle's call gave: the text the model is told, and
// the pictures that go with it (a model that sees images only).
type toolRun struct {
	text   string
	images []Image
}

// runTools runs a cycle's calls at once, each within ToolTimeout, and
// returns what the model is told of each, in call order. It returns once
// every call has ended; cancelling ctx cancels them all. While they run,
// what they report through their ToolHost is shown, and the questions they
// ask the user are put (see Asker), from this goroutine, which owns the
// emitter.
func (a *Agent) runTools(ctx context.Context, calls []ToolCall, watcher ToolEmitter, status StatusEmitter) []toolRun {
	done := make(chan toolOutcome, len(calls))
	notes := make(chan toolNote, toolNoteBuffer)
	finished := make(chan struct{})
	defer close(finished)
	asker := a.newCycleAsker()
	defer close(asker.ended)
	hosts := make([]*ToolHost, len(calls))
	for i, c := range calls {
		if watcher != nil {
			watcher.ToolStarted(c)
		}
		hosts[i] = &ToolHost{Call: c, LLM: a.opts.LLM, Model: a.opts.Model, Vision: a.opts.Vision, index: i, notes: notes, done: finished}
		go func() {
			// The time the user takes to answer a question does not count.
			callCtx, cancel := WithCallTimeout(WithAsker(WithToolHost(ctx, hosts[i]), asker), a.opts.ToolTimeout)
			defer cancel()
			result, err := a.opts.Tools.Call(callCtx, c)
			switch {
			case ctx.Err() != nil:
				err = ErrInterrupted
			case callCtx.Err() != nil:
				err = callCtx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no answer within %s (tools.timeout)", a.opts.ToolTimeout)
			}
			done <- toolOutcome{i: i, result: result, err: err}
		}()
	}
	results := make([]toolRun, len(calls))
	ended := make([]bool, len(calls))
	// show shows the notes waiting. A call's progress that comes after
	// its end would show the call running again, so it is dropped; a step
	// of its own (a status with its own task) is shown while the cycle
	// runs: a server's request made during one call may be put on another
	// that has ended since (mcp's sampling cannot tell which call asked).
	show := func(n toolNote) {
		if !n.progress || !ended[n.index] {
			deliver(n, calls, watcher, status)
		}
	}
	for left := len(calls); left > 0; {
		var o toolOutcome
		select {
		case n := <-notes:
			show(n)
			continue
		case r := <-asker.reqs:
			asker.put(watcher, r)
			continue
		case o = <-done:
		}
		// What the call sent before it returned is waiting already.
		for waiting := true; waiting; {
			select {
			case n := <-notes:
				show(n)
			default:
				waiting = false
			}
		}
		left--
		ended[o.i] = true
		results[o.i] = toolRun{text: ToolResultText(o.result, o.err)}
		if o.err == nil {
			results[o.i].images = hosts[o.i].takeImages()
		}
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
