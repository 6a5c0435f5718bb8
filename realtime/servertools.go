package realtime

import (
	"context"
	"strings"

	"koe/protocol"
)

// koe's own tools (the character's built-in tools and MCP servers) run
// inside the response, as for any koe client. A GA client sees each call
// as the API shows a tool its server runs, an mcp_call item: added with
// its arguments when the model calls it, done with its output (or error)
// when it returns, at its place among the response's output items. The
// server_label is the MCP server's name, "koe" for a built-in tool. The
// beta API has no such item: a beta client sees the calls' effect in the
// answer only. Watchers and the history see them as for any koe client.

func init() {
	frameRenderers = append(frameRenderers, renderServerTools)
}

// renderServerTools renders koe's tool calls (the tool_call message of a
// cycle, then each call's tool message) as mcp_call items.
func renderServerTools(c *Conn, r *response, ctx context.Context, msg any) ([]ev, bool) {
	m, ok := msg.(protocol.MessageEvent)
	if !ok || r == nil || !r.isTurn(c, ctx, msg) {
		return nil, false
	}
	switch {
	case m.Content.Type == protocol.MessageAI && len(m.Content.ToolCalls) > 0:
		if c.dialect.beta {
			return nil, true
		}
		return c.serverCallsStarted(r, m.Content.ToolCalls), true
	case m.Content.Type == protocol.MessageTool:
		if c.dialect.beta {
			return nil, true
		}
		return c.serverCallEnded(r, m.Content), true
	}
	return nil, false
}

// serverLabel is who runs a tool: the MCP server its name starts with
// ("<server>__<tool>"), else koe.
func serverLabel(name string) (label, tool string) {
	if server, rest, ok := strings.Cut(name, "__"); ok && server != "" && rest != "" {
		return server, rest
	}
	return "koe", name
}

// serverCall is a running call of koe's tools: its place in the
// response's calls, and the item before its own.
type serverCall struct {
	at   int
	prev string
}

func (c *Conn) serverCallsStarted(r *response, calls []protocol.ChatToolCall) []ev {
	var events []ev
	for _, call := range calls {
		if r.theirs[call.Name] {
			continue // the client's: functions.go renders it
		}
		c.mu.Lock()
		if r.ended {
			c.mu.Unlock()
			break
		}
		id, prev, index := c.ids.next("item"), c.items.last(), r.nextIndex()
		label, name := serverLabel(call.Name)
		args := string(call.Args)
		added := ev{"id": id, "object": "realtime.item", "type": "mcp_call", "server_label": label, "name": name,
			"arguments": args, "output": nil, "error": nil, "approval_request_id": nil}
		it := &item{id: id, typ: "mcp_call", status: "in_progress", rendered: added}
		_, _ = c.items.insert(it, nil)
		if r.running == nil {
			r.running = map[string]serverCall{}
		}
		r.running[call.ID] = serverCall{at: len(r.toolItems), prev: prev}
		r.toolItems = append(r.toolItems, added)
		c.mu.Unlock()
		at := ev{"response_id": r.id, "item_id": id, "output_index": index}
		events = append(events,
			ev{"type": "response.output_item.added", "response_id": r.id, "output_index": index, "item": with(added, ev{"arguments": ""})},
			ev{"type": "conversation.item.added", "previous_item_id": nullable(prev), "item": with(added, ev{"arguments": ""})},
			with(at, ev{"type": "response.mcp_call_arguments.delta", "delta": args}),
			with(at, ev{"type": "response.mcp_call_arguments.done", "arguments": args}),
			ev{"type": "response.mcp_call.in_progress", "item_id": id, "output_index": index})
	}
	return events
}

func (c *Conn) serverCallEnded(r *response, m protocol.ChatMessage) []ev {
	c.mu.Lock()
	sc, ok := r.running[m.ToolCallID]
	if !ok || r.ended {
		c.mu.Unlock()
		return nil // a client's result, shown as its own item
	}
	delete(r.running, m.ToolCallID)
	i := sc.at
	done := with(r.toolItems[i], nil)
	result := "response.mcp_call.completed"
	if m.Status == protocol.ToolFailed {
		result = "response.mcp_call.failed"
		done["error"] = ev{"type": "tool_execution_error", "message": strings.TrimPrefix(m.Content, "Error: ")}
	} else {
		done["output"] = m.Content
	}
	r.toolItems[i] = done
	id := done["id"].(string)
	index := r.toolIndex(i)
	if j := c.items.index(id); j >= 0 {
		c.items.list[j].status, c.items.list[j].rendered = "completed", done
	}
	c.mu.Unlock()
	return []ev{
		{"type": result, "item_id": id, "output_index": index},
		{"type": "response.output_item.done", "response_id": r.id, "output_index": index, "item": done},
		{"type": "conversation.item.done", "previous_item_id": nullable(sc.prev), "item": done},
	}
}
