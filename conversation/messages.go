package conversation

import (
	"context"

	"koe/agent"
	"koe/protocol"
)

// koe's message events: each finished message of a turn, in the shape the
// chat API streams (the human message, each tool call and result, the
// answer), sent to clients that asked for koe's events.

// message sends m to koe clients and watchers.
func (s *Session) message(ctx context.Context, m protocol.ChatMessage) {
	s.send(ctx, messageEvent(m))
}

func messageEvent(m protocol.ChatMessage) protocol.MessageEvent {
	return protocol.MessageEvent{Type: protocol.TypeMessage, Content: m}
}

// responseMetadata is what an LLM call reported.
func responseMetadata(r agent.CycleResult) protocol.ResponseMetadata {
	meta := protocol.ResponseMetadata{FinishReason: r.FinishReason, ModelName: r.Model}
	if u := r.Usage; u != nil {
		meta.TokenUsage = &protocol.TokenUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	}
	return meta
}
