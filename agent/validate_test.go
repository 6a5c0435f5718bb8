package agent_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"koe/agent"
)

// validateRequest checks the rules every request koe sends must follow,
// whatever the history, and returns the problems found:
//   - one system message, first;
//   - then user and assistant alternating, starting with the user, as
//     strict chat templates require: no two user messages in a row, no
//     two plain answers on one assistant side (tool calls and their
//     results count as the assistant's side);
//   - no orphan tool message: every result answers a call of the
//     assistant message right before its block of results, and every call
//     is answered there;
//   - the persona once, in the latest user message, right above the
//     user's words (or leading the system prompt);
//   - the reminder the last text of the request.
func validateRequest(msgs []agent.WireMessage, persona, reminder string, personaAsSystem bool) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if len(msgs) < 2 || msgs[0].Role != agent.RoleSystem {
		return []string{"the first message is not the system prompt, or nothing follows it"}
	}
	side, plain := "", false
	for i, m := range msgs[1:] {
		i++
		switch m.Role {
		case agent.RoleSystem:
			fail("system message at %d: only the first may be one", i)
		case agent.RoleUser:
			if side == agent.RoleUser {
				fail("user message at %d follows a user message", i)
			}
			side, plain = agent.RoleUser, false
		case agent.RoleAssistant, agent.RoleTool:
			if side == "" {
				fail("the conversation starts with a %s message", m.Role)
			}
			if side == agent.RoleUser {
				side, plain = agent.RoleAssistant, false
			}
			if m.Role == agent.RoleAssistant && len(m.ToolCalls) == 0 {
				if plain {
					fail("assistant message at %d follows another answer", i)
				}
				plain = true
			}
		default:
			fail("message %d has role %q", i, m.Role)
		}
	}

	// Tool blocks: an assistant message with calls, then exactly one
	// result per call, nothing else in between.
	open := map[string]bool{} // calls of the current block not answered yet
	seen := map[string]bool{}
	for i, m := range msgs {
		if m.Role == agent.RoleTool {
			if !open[m.ToolCallID] {
				fail("tool result %d (%q) answers no open call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			fail("message %d (%s) comes before calls %v were answered", i, m.Role, keys(open))
			open = map[string]bool{}
		}
		for _, c := range m.ToolCalls {
			if m.Role != agent.RoleAssistant {
				fail("message %d (%s) carries tool calls", i, m.Role)
			}
			if c.ID == "" || seen[c.ID] {
				fail("tool call id %q at %d is empty or repeated", c.ID, i)
			}
			seen[c.ID] = true
			open[c.ID] = true
		}
	}

	last := msgs[len(msgs)-1]
	if reminder != "" && (last.Role != agent.RoleUser || !strings.HasSuffix(last.Text(), reminder)) {
		fail("the request ends with %s %q, want the reminder last", last.Role, last.Text())
	}
	// The latest user message: the last, or the one before the reminder
	// when that stands alone (after the current turn's tool results).
	latest := -1
	for i := len(msgs) - 1; i > 0 && latest < 0; i-- {
		if msgs[i].Role == agent.RoleUser && !(i == len(msgs)-1 && reminder != "" && msgs[i].Text() == reminder) {
			latest = i
		}
	}
	personas := 0
	for _, m := range msgs[1:] {
		if persona != "" && m.Role == agent.RoleUser {
			personas += strings.Count(m.Text(), persona)
		}
	}
	switch {
	case persona == "":
	case personaAsSystem:
		if !strings.HasPrefix(msgs[0].Content, persona) {
			fail("the system prompt does not start with the persona")
		}
		if personas != 0 {
			fail("the persona is also sent as a user message")
		}
	default:
		if personas != 1 {
			fail("the persona is sent %d times, want once", personas)
		}
		if latest < 0 || !strings.Contains(msgs[latest].Text(), persona+"\n\n") {
			fail("the persona is not right above the user's words in the latest user message (at %d)", latest)
		}
	}
	return bad
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// joinByHand is what strict chat templates need of a logical message
// list, written out independently of the agent: consecutive user messages
// become one, and an assistant's text without calls joins the assistant
// message after it (taking its calls), the texts joined by a blank line.
// (Text only: the tests using it send no images.)
func joinByHand(msgs []agent.WireMessage) []agent.WireMessage {
	var out []agent.WireMessage
	for _, m := range msgs {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			both := prev.Role == m.Role && (m.Role == agent.RoleUser ||
				m.Role == agent.RoleAssistant && len(prev.ToolCalls) == 0)
			if both {
				prev.ToolCalls = m.ToolCalls
				switch {
				case prev.Content == "":
					prev.Content = m.Content
				case m.Content != "":
					prev.Content += "\n\n" + m.Content
				}
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// sentMessages decodes the messages of a request body as the server got
// them, tool calls and ids included.
func sentMessages(t *testing.T, raw []byte) []agent.WireMessage {
	t.Helper()
	var body struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			Name       string          `json:"name"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("request body: %v", err)
	}
	out := make([]agent.WireMessage, len(body.Messages))
	for i, m := range body.Messages {
		w := agent.WireMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
		switch c := strings.TrimSpace(string(m.Content)); {
		case c == "" || c == "null":
		case c[0] == '"':
			if err := json.Unmarshal(m.Content, &w.Content); err != nil {
				t.Fatal(err)
			}
		default:
			var parts []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL struct {
					URL    string `json:"url"`
					Detail string `json:"detail"`
				} `json:"image_url"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				t.Fatal(err)
			}
			for _, p := range parts {
				w.Parts = append(w.Parts, agent.ContentPart{Text: p.Text, ImageURL: p.ImageURL.URL, Detail: agent.ImageDetail(p.ImageURL.Detail)})
			}
		}
		for _, c := range m.ToolCalls {
			if c.Type != "function" {
				t.Errorf("tool call %q has type %q", c.ID, c.Type)
			}
			w.ToolCalls = append(w.ToolCalls, agent.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		out[i] = w
	}
	return out
}

// equalWire compares what matters on the wire: roles, texts, images,
// calls and the ids results answer.
func equalWire(a, b []agent.WireMessage) bool {
	return slices.EqualFunc(a, b, func(x, y agent.WireMessage) bool {
		return x.Role == y.Role && x.Text() == y.Text() && x.ToolCallID == y.ToolCallID &&
			slices.Equal(x.ToolCalls, y.ToolCalls) && slices.Equal(images(x), images(y))
	})
}

func images(m agent.WireMessage) []agent.ContentPart {
	var out []agent.ContentPart
	for _, p := range m.Parts {
		if p.ImageURL != "" {
			out = append(out, p)
		}
	}
	return out
}
