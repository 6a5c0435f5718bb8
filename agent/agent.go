// Package agent is koe's memory agent: it keeps a conversation's messages,
// builds the context for every LLM call and streams the answer. It knows
// nothing about WebSockets; it pushes what it produces to an Emitter.
package agent

import (
	"context"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Roles of memory messages.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
)

// Message is the agent's rich internal message.
type Message struct {
	Role    string
	Content string
	// Interrupted marks an assistant reply the user cut off; Content is the
	// part they heard.
	Interrupted bool
	Time        time.Time
}

// Emitter receives what the agent produces while a reply streams.
type Emitter interface {
	Token(delta string)
}

// Streamer is the LLM as the agent uses it.
type Streamer interface {
	Stream(ctx context.Context, msgs []openai.ChatCompletionMessage, onDelta func(string)) error
}

// Agent is one conversation's memory plus its LLM. Each session owns its own
// Agent: sessions never share memory.
type Agent struct {
	llm     Streamer
	persona string

	mu     sync.Mutex
	memory []Message
}

// New returns an agent with empty memory.
func New(llm Streamer, persona string) *Agent {
	return &Agent{llm: llm, persona: persona}
}

// Load replaces the memory, e.g. when the client switches history.
func (a *Agent) Load(msgs []Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.memory = append([]Message(nil), msgs...)
}

// Memory returns a copy of the current memory.
func (a *Agent) Memory() []Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Message(nil), a.memory...)
}

// AddUser appends the user's message.
func (a *Agent) AddUser(text string) {
	a.add(Message{Role: RoleUser, Content: text, Time: time.Now()})
}

// AddAssistant appends the assistant's reply (or the heard part of it).
func (a *Agent) AddAssistant(text string, interrupted bool) {
	a.add(Message{Role: RoleAssistant, Content: text, Interrupted: interrupted, Time: time.Now()})
}

func (a *Agent) add(m Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.memory = append(a.memory, m)
}

// Reply streams the assistant's answer to the current memory. The caller
// records the reply with AddAssistant once it knows what the user heard.
func (a *Agent) Reply(ctx context.Context, emit Emitter) error {
	return a.llm.Stream(ctx, a.buildContext(), emit.Token)
}

// interruptedNote tells the model, once, that its last reply was cut off.
// It is added only after the latest assistant message, so a run of
// interrupts never piles notes (or "...") into later requests.
const (
	interruptedNote      = "The user interrupted your previous reply; they heard only the part above. Do not repeat it unless asked."
	interruptedEmptyNote = "The user interrupted your previous reply before hearing any of it."
)

func (a *Agent) buildContext() []openai.ChatCompletionMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	msgs := make([]openai.ChatCompletionMessage, 0, len(a.memory)+2)
	if a.persona != "" {
		msgs = append(msgs, openai.ChatCompletionMessage{Role: RoleSystem, Content: a.persona})
	}
	lastAssistant := -1
	for i, m := range a.memory {
		if m.Role == RoleAssistant {
			lastAssistant = i
		}
	}
	for i, m := range a.memory {
		if m.Content != "" {
			msgs = append(msgs, openai.ChatCompletionMessage{Role: m.Role, Content: m.Content})
		}
		if i == lastAssistant && m.Interrupted {
			note := interruptedNote
			if m.Content == "" {
				note = interruptedEmptyNote
			}
			msgs = append(msgs, openai.ChatCompletionMessage{Role: RoleSystem, Content: note})
		}
	}
	return msgs
}
