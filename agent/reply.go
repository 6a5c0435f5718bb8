package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ReplyBytes is the room the buffers that gather a streamed reply's text
// start with: a spoken reply of a few sentences fits, where growing from a
// token's size took five or six copies per buffer and reply.
const ReplyBytes = 256

// citationNote ends the system prompt, and citationReminder is the last
// user message, of every cycle after a search tool ran in the turn.
const (
	citationNote     = "\n\nCitations: the search results in this turn are numbered documents. When you use one, cite it by its number in square brackets, like [1], right after what it supports; cite nothing else."
	citationReminder = "Cite the documents you used by their number, like [1]."
	documentsNote    = "\n\nCitations: the documents in this conversation are numbered. When you use one, cite it by its number in square brackets, like [1], right after what it supports; cite nothing else."
)

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

// Reply streams the assistant's answer to the current memory. With tools,
// a turn takes up to MaxCycles LLM calls: a cycle that calls tools runs
// them, adds the calls and their results to memory and goes on; the last
// allowed cycle must answer in text. The caller records the final reply
// with AddAssistant once it knows what the user heard.
func (a *Agent) Reply(ctx context.Context, emit Emitter) error {
	return a.ReplyWith(ctx, emit, ClientTools{})
}

// ReplyWith is Reply with the client's own tools offered too (see
// ClientTools). A cycle that calls any of them runs koe's calls of that
// cycle, then hands the client's out through emit (a ClientCallEmitter)
// and ends the turn: it has no final reply until the client's results
// come (AddToolResult) and the next turn continues.
func (a *Agent) ReplyWith(ctx context.Context, emit Emitter, client ClientTools) error {
	theirs := client.names()
	handOut, _ := emit.(ClientCallEmitter)
	if len(theirs) > 0 {
		if handOut == nil {
			return ErrNoClientEmitter
		}
		if err := client.Validate(a.opts.MaxTools); err != nil {
			return fmt.Errorf("client tools: %w", err)
		}
	}
	own, available := a.offeredTools(true, len(client.Specs))
	specs := withClientTools(client.Specs, own)
	available += len(client.Specs)
	watcher, _ := emit.(ToolEmitter)
	cycles, _ := emit.(CycleEmitter)
	searcher, _ := a.opts.Tools.(Searcher)
	searched := false
	memories := a.recall(ctx)
	docs := a.readKnowledge(ctx, emit)
	hasDocs := a.offerDocuments(docs, emit)
	opts := replyOptionsOf(ctx)
	for cycle := 1; ; cycle++ {
		last := cycle >= a.opts.MaxCycles
		note, reminder := opts.note()+toolsNote(specs, last), ""
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
		if len(specs) > 0 && cycle == 1 {
			req.ToolChoice, req.ToolFunction = client.Choice.Mode, client.Choice.Function
		}
		if len(specs) > 0 && last {
			req.ToolChoice, req.ToolFunction = ToolChoiceNone, ""
		}
		opts.apply(&req)
		var said strings.Builder
		if cycles != nil {
			cycles.CycleStarted(cycle)
		}
		res, err := a.opts.LLM.Stream(ctx, req, func(d string) {
			if said.Cap() == 0 {
				said.Grow(ReplyBytes)
			}
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
		if len(specs) == 0 {
			// Calls nobody offered: another cycle cannot help.
			return &LLMError{Kind: KindUnofferedTools, Model: a.opts.Model,
				Detail: fmt.Sprintf("it called %s in LLM call %d of the turn", res.ToolCalls[0].Name, cycle)}
		}
		if last {
			// Calls after being told to answer: the model cannot be
			// helped by another cycle.
			return &LLMError{Kind: KindTooManyCycles, Model: a.opts.Model,
				Detail: fmt.Sprintf("it called %s in LLM call %d of the turn, the last allowed (llm.max_cycles %d)", res.ToolCalls[0].Name, cycle, a.opts.MaxCycles)}
		}
		a.add(Message{Role: RoleAssistant, Content: said.String(), ToolCalls: res.ToolCalls, Time: a.opts.Now()})
		if watcher != nil {
			watcher.ToolsCalled(res.ToolCalls)
		}
		calls, clientCalls := splitCalls(res.ToolCalls, theirs)
		for _, c := range calls {
			searched = searched || searcher != nil && searcher.IsSearch(c.Name)
		}
		status, _ := emit.(StatusEmitter)
		results := a.runTools(ctx, calls, watcher, status)
		// Every call gets its result in memory, even after an interrupt:
		// a call without one would break every later request.
		for i, c := range calls {
			a.add(Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: results[i].text, Images: results[i].images, Time: a.opts.Now()})
		}
		if err := ctx.Err(); err != nil {
			// The client's calls never went out: they end as koe's do.
			for _, c := range clientCalls {
				a.add(Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: ToolResultText("", ErrInterrupted), Time: a.opts.Now()})
				if watcher != nil {
					watcher.ToolFinished(c, "", ErrInterrupted)
				}
			}
			return err
		}
		if len(clientCalls) > 0 {
			handOut.ClientCalls(clientCalls)
			return nil
		}
	}
}

// splitCalls parts a cycle's calls into koe's (run here) and the client's
// (handed out), each in the model's order.
func splitCalls(calls []ToolCall, theirs map[string]bool) (own, client []ToolCall) {
	if len(theirs) == 0 {
		return calls, nil
	}
	for _, c := range calls {
		if theirs[c.Name] {
			client = append(client, c)
		} else {
			own = append(own, c)
		}
	}
	return own, client
}
