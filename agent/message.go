package agent

import (
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Roles of memory messages.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
	RoleTool      = "tool"
)

// ToolCall is one function call the assistant asked for.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is the agent's rich internal message: what the conversation
// layer and the stores see. The LLM wire shape is built only at the edge.
type Message struct {
	Role    string
	Content string
	// ToolCalls are set on an assistant message that calls tools; such a
	// message does not end its turn.
	ToolCalls []ToolCall
	// ToolCallID and Name are set on a tool result.
	ToolCallID string
	Name       string
	// Interrupted marks an assistant reply the user cut off; Content is the
	// part they heard.
	Interrupted bool
	Time        time.Time
}

// endsTurn reports whether m is a turn's final assistant message.
func (m Message) endsTurn() bool {
	return m.Role == RoleAssistant && len(m.ToolCalls) == 0
}

// chars is what m weighs for compression statistics.
func (m Message) chars() int {
	n := len([]rune(m.Content))
	for _, c := range m.ToolCalls {
		n += len([]rune(c.Name)) + len([]rune(c.Arguments))
	}
	return n
}

// wire converts m to go-openai's request shape.
func (m Message) wire() openai.ChatCompletionMessage {
	w := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
	for _, c := range m.ToolCalls {
		w.ToolCalls = append(w.ToolCalls, openai.ToolCall{
			ID:       c.ID,
			Type:     openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments},
		})
	}
	return w
}

// Turn is one user message, every tool call and result that followed it,
// and the final assistant message (an assistant message without tool calls).
type Turn struct {
	Index    int // 1-based position of the turn in its history
	Messages []Message
}

// Complete reports whether the turn has its final assistant message.
func (t Turn) Complete() bool {
	return len(t.Messages) > 0 && t.Messages[len(t.Messages)-1].endsTurn()
}

// Chars is the turn's size for compression statistics.
func (t Turn) Chars() int {
	n := 0
	for _, m := range t.Messages {
		n += m.chars()
	}
	return n
}

// SplitTurns groups messages into turns: each user message starts one.
// Anything before the first user message (there should be nothing) is
// dropped, since it cannot be placed in a turn.
func SplitTurns(msgs []Message) []Turn {
	var turns []Turn
	for _, m := range msgs {
		if m.Role == RoleUser {
			turns = append(turns, Turn{Index: len(turns) + 1})
		}
		if len(turns) == 0 || m.Role == RoleSystem {
			continue
		}
		last := &turns[len(turns)-1]
		last.Messages = append(last.Messages, m)
	}
	return turns
}
