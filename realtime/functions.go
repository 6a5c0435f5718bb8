package realtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"koe/agent"
	"koe/protocol"
)

// Function calling: the client's tools (session.update's or
// response.create's "tools" and "tool_choice") are offered to the model
// beside the character's own tools and MCP servers. When the model calls
// one of the client's, koe does not run it: the response shows the call
// as a function_call item (output_item.added, the arguments' delta and
// done, output_item.done) and ends; the client runs it, adds a
// function_call_output item with the call's call_id, and asks for a
// response, which goes on from the result with no new user message. koe's
// own tools run inside the response, as for any koe client; the Realtime
// client sees their effect in the answer only (their steps reach koe's own
// watchers and the history).

func init() {
	makeItem("function_call_output", functionOutputItem)
	frameRenderers = append(frameRenderers, renderClientCalls)
}

// functionTool is one of the client's tools as the API defines it.
type functionTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// clientTools reads "tools" and "tool_choice" (param names the field,
// "session" or "response") into the agent's terms, checked as the agent
// checks them except for their number, which the character bounds (see
// startResponse).
func clientTools(tools, choice json.RawMessage, param string) (agent.ClientTools, error) {
	// Their size is bounded by server.max_message_bytes, and what the
	// model is sent by its window (a turn whose tools do not fit fails,
	// naming llm.context_window); their number by llm.max_tools.
	var ct agent.ClientTools
	if len(tools) > 0 && !isNull(tools) {
		var defs []functionTool
		if err := json.Unmarshal(tools, &defs); err != nil {
			return ct, refuse(codeInvalidValue, param+".tools", "tools is an array of {type: \"function\", name, description, parameters}")
		}
		for i, d := range defs {
			if d.Type != "function" && d.Type != "" {
				return ct, refuse(codeUnsupported, fmt.Sprintf("%s.tools[%d].type", param, i),
					fmt.Sprintf("tools of type %q are not supported: koe's MCP servers are the character's (tools.mcp_servers), and a client's tools are functions", short(d.Type)))
			}
			if isNull(d.Parameters) {
				d.Parameters = nil
			}
			ct.Specs = append(ct.Specs, agent.ToolSpec{Name: d.Name, Description: d.Description, Parameters: d.Parameters})
		}
	}
	c, err := toolChoice(choice, param)
	if err != nil {
		return ct, err
	}
	ct.Choice = c
	if f := c.Function; f != "" && !slices.ContainsFunc(ct.Specs, func(s agent.ToolSpec) bool { return s.Name == f }) {
		return ct, refuse(codeInvalidValue, param+".tool_choice", fmt.Sprintf("tool_choice names the function %q, which is not among the tools", short(f)))
	}
	if err := ct.Validate(0); err != nil {
		return ct, refuse(codeInvalidValue, param+".tools", err.Error())
	}
	return ct, nil
}

// toolChoice reads tool_choice: "auto", "none", "required", or a function
// as GA names it ({"type": "function", "name": …}) or as beta's reference
// shows it ({"type": "function", "function": {"name": …}}).
func toolChoice(raw json.RawMessage, param string) (agent.ToolChoice, error) {
	if len(raw) == 0 || isNull(raw) {
		return agent.ToolChoice{}, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case agent.ToolChoiceAuto, agent.ToolChoiceNone, agent.ToolChoiceRequired:
			return agent.ToolChoice{Mode: mode}, nil
		}
		return agent.ToolChoice{}, refuse(codeInvalidValue, param+".tool_choice", fmt.Sprintf("tool_choice %q is not auto, none, required or {type: \"function\", name}", short(mode)))
	}
	var fn struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &fn); err != nil || fn.Type != "function" {
		return agent.ToolChoice{}, refuse(codeInvalidValue, param+".tool_choice", "tool_choice is auto, none, required or {type: \"function\", name}")
	}
	name := fn.Name
	if name == "" {
		name = fn.Function.Name
	}
	if name == "" {
		return agent.ToolChoice{}, refuse(codeMissing, param+".tool_choice.name", "a function tool_choice names the function")
	}
	return agent.ToolChoice{Function: name}, nil
}

// clientTools is what the response offers of the client's tools: the
// session's, or the response's own where it sets them; at most limit
// (the character's llm.max_tools).
func (p plan) clientTools(limit int) (agent.ClientTools, error) {
	tools, choice, param := p.cfg.tools, p.cfg.toolChoice, "session"
	if p.tools != nil || p.toolChoice != nil {
		tools, choice, param = or(p.tools, tools), or(p.toolChoice, choice), "response"
	}
	ct, err := clientTools(tools, choice, param)
	if err != nil {
		return ct, err
	}
	if len(ct.Specs) > limit {
		return ct, refuse(codeInvalidValue, param+".tools", fmt.Sprintf("%d tools: this character takes at most %d (llm.max_tools)", len(ct.Specs), limit))
	}
	return ct, nil
}

// functionNames is the set of the client's function names.
func functionNames(ct agent.ClientTools) map[string]bool {
	names := make(map[string]bool, len(ct.Specs))
	for _, s := range ct.Specs {
		names[s.Name] = true
	}
	return names
}

// nextIndex is the output_index of the response's next tool call item:
// after the calls before it and the message item, if it was announced.
// Called locked.
func (r *response) nextIndex() int { return r.toolIndex(len(r.toolItems)) }

// toolIndex is the output_index of r.toolItems[i]: the message item, once
// announced, sits before the calls made after its first words. Called
// locked.
func (r *response) toolIndex(i int) int {
	if r.opened && i >= r.msgIndex {
		return i + 1
	}
	return i
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// functionOutputItem takes the client's result of a call it was handed:
// the session keeps it for the next response, which goes on from it. A
// call_id no call waits for is refused.
func functionOutputItem(c *Conn, n *newItem) (*item, error) {
	if n.CallID == "" {
		return nil, refuse(codeMissing, "item.call_id", "a function_call_output item names the call it answers (call_id)")
	}
	// The result goes to the session only once the item is taken
	// (addItem): a refused item must leave the call waiting for its
	// corrected retry.
	submit := func() error {
		if err := c.sess.SubmitToolResult(n.CallID, n.Output); err != nil {
			return refuse(codeInvalidValue, "item.call_id", err.Error())
		}
		return nil
	}
	return &item{typ: "function_call_output", submit: submit,
		rendered: ev{"type": "function_call_output", "call_id": n.CallID, "output": n.Output}}, nil
}

// renderClientCalls renders the model's calls of the client's tools as
// function_call items of the running response, after its message item.
// Their arguments come whole from the model's stream, so each has one
// delta.
func renderClientCalls(c *Conn, r *response, ctx context.Context, msg any) ([]ev, bool) {
	calls, ok := msg.(protocol.ClientToolCalls)
	if !ok {
		return nil, false
	}
	if r == nil || !r.isTurn(c, ctx, msg) {
		return nil, true
	}
	var events []ev
	for _, call := range calls.Calls {
		c.mu.Lock()
		if r.ended {
			c.mu.Unlock()
			break
		}
		id, prev, index := c.ids.next("item"), c.items.last(), r.nextIndex()
		done := ev{"id": id, "object": "realtime.item", "type": "function_call", "status": "completed",
			"name": call.Name, "call_id": call.ID, "arguments": call.Arguments}
		it := &item{id: id, typ: "function_call", status: "completed", rendered: done}
		_, _ = c.items.insert(it, nil)
		r.toolItems = append(r.toolItems, done)
		c.mu.Unlock()
		added := with(done, ev{"status": "in_progress", "arguments": ""})
		at := ev{"response_id": r.id, "item_id": id, "output_index": index, "call_id": call.ID}
		events = append(events,
			ev{"type": "response.output_item.added", "response_id": r.id, "output_index": index, "item": added},
			ev{"type": "conversation.item.added", "previous_item_id": nullable(prev), "item": added},
			with(at, ev{"type": "response.function_call_arguments.delta", "delta": call.Arguments}),
			with(at, ev{"type": "response.function_call_arguments.done", "name": call.Name, "arguments": call.Arguments}),
			ev{"type": "response.output_item.done", "response_id": r.id, "output_index": index, "item": done},
			ev{"type": "conversation.item.done", "previous_item_id": nullable(prev), "item": done})
	}
	return events, true
}
