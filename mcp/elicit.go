package mcp

import (
	"context"
	"encoding/json"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"koe/agent"
)

// A server may ask the user something while one of its tools runs
// (elicitation). koe puts the question to the user of the turn whose call
// it belongs to, by voice and in text (agent.Asker), and sends back what
// they answered. On the newest protocol the server answers the call with
// its questions and the SDK calls the handler with the call's own
// context, so the question reaches that call's asker. On older ones the
// server sends elicitation/create while it serves the call, and nothing
// says which call it belongs to: koe then answers only when the server's
// calls under way are all one conversation's; otherwise (no call, or
// calls of several conversations at once) it declines, and logs why.

// askers are the askers of a server's calls under way.
type askers struct {
	mu    sync.Mutex
	calls map[*callAsker]struct{}
}

type callAsker struct {
	asker agent.Asker
	ctx   context.Context // the call's: the question ends with it
	call  agent.ToolCall
	spec  string // "MCP server <name>"
}

// callKey carries the call a context runs, for a question asked with it.
type callKey struct{}

// during registers the asker of a call's ctx while the call runs.
func (as *askers) during(ctx context.Context, call agent.ToolCall, source string) func() {
	a := agent.AskerFrom(ctx)
	if a == nil {
		return func() {}
	}
	c := &callAsker{asker: a, ctx: ctx, call: call, spec: source}
	as.mu.Lock()
	if as.calls == nil {
		as.calls = map[*callAsker]struct{}{}
	}
	as.calls[c] = struct{}{}
	as.mu.Unlock()
	return func() {
		as.mu.Lock()
		delete(as.calls, c)
		as.mu.Unlock()
	}
}

// only is the one asker of the calls under way, if they share one.
func (as *askers) only() (*callAsker, int) {
	as.mu.Lock()
	defer as.mu.Unlock()
	var found *callAsker
	distinct := 0
	for c := range as.calls {
		if found == nil || c.asker != found.asker {
			distinct++
		}
		found = c
	}
	if distinct != 1 {
		return nil, distinct
	}
	return found, 1
}

// addElicitation offers form elicitation to the server.
func (s *server) addElicitation(opts *sdk.ClientOptions) {
	opts.Capabilities.Elicitation = &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}}
	opts.ElicitationHandler = s.elicit
}

func (s *server) elicit(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	p := req.Params
	if p.Mode != "" && p.Mode != "form" {
		s.log.Info("MCP server asked for a URL elicitation; declined (koe offers form elicitation only)")
		return &sdk.ElicitResult{Action: agent.Decline}, nil
	}
	c, n := s.asking.only()
	if a := agent.AskerFrom(ctx); a != nil {
		// The call's own context (multi round-trip): its asker.
		c, n = &callAsker{asker: a, ctx: ctx, spec: "MCP server " + s.name}, 1
		if call, ok := ctx.Value(callKey{}).(agent.ToolCall); ok {
			c.call = call
		}
	}
	if c == nil {
		why := "no call of its tools is under way"
		if n > 1 {
			why = "calls of several conversations are under way and MCP does not say whose question it is"
		}
		s.log.Info("MCP server asked the user something; declined: "+why, "message", clip(p.Message, 200))
		return &sdk.ElicitResult{Action: agent.Decline}, nil
	}
	schema, err := json.Marshal(p.RequestedSchema)
	if err != nil || string(schema) == "null" {
		schema = []byte(`{"type":"object","properties":{}}`)
	}
	if n := len(schema); n > s.limits.schema {
		s.log.Warn("MCP server's question declined: its schema is larger than mcp_max_schema_bytes", "bytes", n, "mcp_max_schema_bytes", s.limits.schema)
		return &sdk.ElicitResult{Action: agent.Decline}, nil
	}
	text, speech, options, err := agent.ElicitQuestion(clip(p.Message, s.limits.description), schema)
	if err != nil {
		return &sdk.ElicitResult{Action: agent.Decline}, nil
	}
	// The question ends with the server's request or with the call.
	askCtx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	ans := c.asker.Ask(askCtx, agent.Question{Kind: agent.AskElicit, Text: text, Speech: speech,
		Call: c.call, Source: c.spec, Schema: schema, Options: options})
	res := &sdk.ElicitResult{Action: ans.Action}
	if ans.Action == agent.Accept {
		res.Content = ans.Content
	}
	return res, nil
}
