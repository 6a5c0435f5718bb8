package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// StatusEmitter is an Emitter told of the long steps of a turn before the
// model answers (routing, searching the knowledge base), so that clients
// can show them. Its method is called from Reply's goroutine, in order.
type StatusEmitter interface {
	Emitter
	// Status reports a step: state is "start", "end" or "error"; task
	// names the step, the same for its start and its end.
	Status(task, state, text, details string)
}

// DocumentEmitter is an Emitter told which numbered documents a turn's
// requests hold, once, before the first LLM call: the files attached to
// the conversation and what the knowledge base gave. What the answer
// cites as [n] is one of them (or of a search tool's results).
type DocumentEmitter interface {
	Emitter
	Documents(docs []Document)
}

// fileReserve is what a file may not take of the window: room for the
// message it comes with and for the conversation around it.
const fileReserve = 512

// AttachFile adds a file to the conversation at this point: it rides with
// the next user message. The file's Number is the caller's (its place
// among the history's files).
func (a *Agent) AttachFile(f File) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pendingFiles = append(a.pendingFiles, f)
}

// FileRoom is the most tokens a file attached now may have: what the
// model's window leaves beside the parts of a request koe never cuts (the
// system prompt, the persona, the tools) and a reserve for the message it
// comes with.
func (a *Agent) FileRoom() int {
	specs, _ := a.offeredTools(false, 0)
	a.mu.Lock()
	system, persona := joinText(a.systemPromptLocked(), a.opts.Rules), a.opts.Persona
	a.mu.Unlock()
	tok := a.opts.Tokenizer
	fixed := systemTokens(tok, system, "") + tok.CountTools(specs)
	if persona != "" {
		fixed += tok.CountMessage(WireMessage{Role: RoleUser, Content: persona})
	}
	return a.InputBudget() - fixed - fileReserve
}

// InputBudget is the most tokens a request may hold: the model's window
// less the safety margin.
func (a *Agent) InputBudget() int {
	return int(float64(a.opts.ContextWindow) * (1 - contextMargin))
}

// maxFileNumberLocked is the highest number a file of this conversation
// has: documents the knowledge base gives a turn are numbered after it.
func (a *Agent) maxFileNumberLocked() int {
	n := 0
	for _, m := range a.msgs {
		for _, f := range m.Files {
			n = max(n, f.Number)
		}
	}
	for _, f := range a.pendingFiles {
		n = max(n, f.Number)
	}
	return n
}

// filesLocked are the files of the messages in memory, without their text.
func (a *Agent) filesLocked() []Document {
	var out []Document
	for _, m := range a.msgs {
		for _, f := range m.Files {
			d := f.document()
			d.Contents = ""
			out = append(out, d)
		}
	}
	return out
}

// readKnowledge asks the character's knowledge base about the current
// turn's message, routing first in the llm mode, and numbers what it
// gives after the conversation's files. Its failure is logged, never the
// turn's.
func (a *Agent) readKnowledge(ctx context.Context, emit Emitter) []Document {
	if a.opts.Knowledge == nil {
		return nil
	}
	a.mu.Lock()
	text := ""
	turns := splitTurns(a.msgs)
	if n := len(turns); n > 0 && !turns[n-1].Complete() {
		text = turns[n-1].Messages[0].Content
	}
	first := a.maxFileNumberLocked() + 1
	a.mu.Unlock()
	if strings.TrimSpace(text) == "" {
		return nil
	}
	status, _ := emit.(StatusEmitter)
	say := func(task, state, msg, details string) {
		if status != nil {
			status.Status(task, state, msg, details)
		}
	}
	q := KnowledgeQuery{Text: text, InputBudget: a.InputBudget(), Mode: KnowledgeAuto,
		OnSearch: func() { say("knowledge", "start", "Searching the documents", "") }}
	if a.opts.Router == RouterLLM {
		q.Mode = KnowledgeWholeOnly
	}
	res, err := a.opts.Knowledge.Read(ctx, q)
	if err == nil && a.opts.Router == RouterLLM && !res.Whole && len(res.Titles) > 0 {
		say("router", "start", "Deciding whether to search the documents", "")
		route, reason, rerr := a.route(ctx, text, res.Titles)
		switch {
		case rerr != nil && ctx.Err() != nil:
			return nil
		case rerr != nil:
			a.log.Warn("knowledge: the router failed; answering without the documents", "err", rerr)
			say("router", "error", "Answering without the documents", rerr.Error())
		case route == RouteRAG:
			say("router", "end", "Searching the documents: "+reason, "")
			q.Mode = KnowledgeAlways
			res, err = a.opts.Knowledge.Read(ctx, q)
		default:
			say("router", "end", "Answering without the documents: "+reason, "")
		}
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			a.log.Warn("knowledge: could not read the knowledge base; the reply goes on without it", "err", err)
			say("knowledge", "error", "The documents could not be read", err.Error())
		}
		return nil
	}
	if res.Searched {
		say("knowledge", "end", foundText(res.Documents), "")
	}
	docs := make([]Document, len(res.Documents))
	for i, d := range res.Documents {
		d.Number = first + i
		docs[i] = d
	}
	return docs
}

// foundText says what a search found: "Found 3 passages in handbook.pdf
// and rules.html".
func foundText(docs []Document) string {
	if len(docs) == 0 {
		return "Nothing in the documents bears on this"
	}
	var names []string
	seen := map[string]bool{}
	for _, d := range docs {
		if !seen[d.Source] {
			seen[d.Source] = true
			names = append(names, d.Source)
		}
	}
	noun := "passages"
	if len(docs) == 1 {
		noun = "passage"
	}
	list := names[0]
	if n := len(names); n > 1 {
		list = strings.Join(names[:n-1], ", ") + " and " + names[n-1]
	}
	return fmt.Sprintf("Found %d %s in %s", len(docs), noun, list)
}

// The router's modes (knowledge.router): RouterLLM asks the model before
// reading retrieved passages; any other value reads them when they match.
const (
	RouterAuto = "auto"
	RouterLLM  = "llm"
)

// offerDocuments tells the emitter which documents the turn's requests
// hold, and reports whether there are any (then the model is asked to
// cite them).
func (a *Agent) offerDocuments(docs []Document, emit Emitter) bool {
	a.mu.Lock()
	all := append(a.filesLocked(), docs...)
	a.mu.Unlock()
	if len(all) == 0 {
		return false
	}
	if de, ok := emit.(DocumentEmitter); ok {
		listed := make([]Document, len(all))
		for i, d := range all {
			d.Contents = ""
			listed[i] = d
		}
		de.Documents(listed)
	}
	return true
}

// documentsMessage is the knowledge base's part of a request ("" = none).
func documentsMessage(docs []Document) string {
	if len(docs) == 0 {
		return ""
	}
	return DocumentsJSON(docs)
}

// CountTokens counts text with the model's tokenizer.
func (a *Agent) CountTokens(text string) int { return a.opts.Tokenizer.Count(text) }

// NextFileNumber is the number the next file attached to the conversation
// gets.
func (a *Agent) NextFileNumber() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.maxFileNumberLocked() + 1
}
