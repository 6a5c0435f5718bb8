package conversation

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"koe"
	"koe/agent"
	"koe/internal/quote"
	"koe/protocol"
)

// koe's message events: each finished message of a turn, in the shape the
// chat API streams (the human message, each tool call and result, the
// answer), sent to clients that asked for koe's events.

// message sends m to a koe client.
func (s *Session) message(ctx context.Context, m protocol.ChatMessage) {
	if s.koeEvents {
		s.send(ctx, messageEvent(m))
	}
}

func messageEvent(m protocol.ChatMessage) protocol.MessageEvent {
	return protocol.MessageEvent{Type: protocol.TypeMessage, Content: m}
}

// toolCallMessage is the ai message of a cycle that called tools.
func toolCallMessage(r koe.Record, run string, meta protocol.ResponseMetadata) protocol.ChatMessage {
	m := protocol.ChatMessage{Type: protocol.MessageAI, Content: r.Content, Name: r.Name, RunID: run, ResponseMetadata: meta}
	for _, c := range r.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, protocol.ChatToolCall{ID: c.ID, Name: c.Name, Args: toolArgs(c.Arguments), Type: "tool_call"})
	}
	return m
}

// toolResultMessage is the tool message of one call's result.
func toolResultMessage(r koe.Record, run string) protocol.ChatMessage {
	return protocol.ChatMessage{Type: protocol.MessageTool, Content: r.Content, ToolCallID: r.ToolCallID, Name: r.Name,
		Status: protocol.ToolSuccess, RunID: run}
}

// toolArgs is a call's arguments as JSON: the object the model wrote, or
// the text as a JSON string when it is not valid JSON.
func toolArgs(args string) json.RawMessage {
	if args == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	quoted, _ := json.Marshal(args)
	return quoted
}

// responseMetadata is what an LLM call reported.
func responseMetadata(r agent.CycleResult) protocol.ResponseMetadata {
	meta := protocol.ResponseMetadata{FinishReason: r.FinishReason, ModelName: r.Model}
	if u := r.Usage; u != nil {
		meta.TokenUsage = &protocol.TokenUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	}
	return meta
}

// Histories lists a character's non-empty histories, newest first.
// A conf_uid that is no character's and has no histories is not found.
func (h *Hub) Histories(conf string) (protocol.HistoryList, error) {
	list, err := h.histories(conf)
	if err == nil && len(list.Histories) == 0 && !h.deps.Characters.Has(conf) {
		return protocol.HistoryList{}, koe.Errorf(koe.NotFound, "no character has conf_uid %q", quote.Shorten(conf, 80))
	}
	return list, err
}

func (h *Hub) histories(conf string) (protocol.HistoryList, error) {
	// context.TODO: as Prompt's.
	list, err := h.deps.Store.List(context.TODO(), conf)
	if err != nil {
		return protocol.HistoryList{}, fmt.Errorf("list histories: %w", err)
	}
	return historyListMessage(conf, list), nil
}

// ChatHistory reads up to limit records of a history older than record
// before (0: the newest) as the chat API's messages, tool calls and
// results included.
func (h *Hub) ChatHistory(conf, uid string, before uint64, limit int) (protocol.ChatHistory, error) {
	records, more, err := h.deps.Store.Page(context.TODO(), conf, uid, before, pageLimit(limit, h.deps.Config.HistoryMessages))
	if err != nil {
		return protocol.ChatHistory{}, fmt.Errorf("read history: %w", err)
	}
	out := protocol.ChatHistory{ConfUID: conf, HistoryUID: uid, Messages: []protocol.ChatMessage{}, More: more}
	said := "" // what the turn's tool cycles said, which its AI record repeats
	for _, r := range records {
		var m protocol.ChatMessage
		switch {
		case r.Role == koe.RoleHuman:
			m = protocol.ChatMessage{Type: protocol.MessageHuman, Content: r.Content, Name: r.Name}
			for _, img := range r.Images {
				m.AdditionalKwargs.Images = append(m.AdditionalKwargs.Images, protocol.HistoryImage{Source: img.Source, MimeType: img.MimeType, URL: ImagePath(conf, uid, img.Ref)})
			}
			said = ""
		case r.Role == koe.RoleToolCall:
			m = toolCallMessage(r, "", protocol.ResponseMetadata{})
			said = joinSaid(said, r.Content)
		case r.Role == koe.RoleTool:
			m = toolResultMessage(r, "")
			if strings.HasPrefix(r.Content, "Error: ") {
				m.Status = protocol.ToolFailed
			}
		case r.Role == koe.RoleAI:
			text := afterSaid(r.Content, said)
			m = protocol.ChatMessage{Type: protocol.MessageAI, Content: text, Name: r.Name}
			m.AdditionalKwargs.Interrupted = r.Interrupted
			said = ""
		default:
			continue // metadata, proactive instructions
		}
		m.AdditionalKwargs.ID, m.AdditionalKwargs.Timestamp = r.Seq, r.Timestamp
		out.Messages = append(out.Messages, m)
	}
	return out, nil
}
