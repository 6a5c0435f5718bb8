package protocol

import "encoding/json"

// The chat API over HTTP (POST /api/chat/stream, /api/chat/invoke) and
// koe's own WebSocket events share one shape: {"type", "content"}. Over
// Server-Sent Events every event is one `data:` line of it; a koe.v1
// WebSocket client gets the token, status and message events as frames.

// Chat event types. token, status, message and citations are also koe.v1
// WebSocket frames; error and end exist only in the event stream (the
// WebSocket has OLV's error frame and conversation-chain-end).
const (
	EventToken     = TypeToken
	EventStatus    = TypeStatus
	EventMessage   = TypeMessage
	EventCitations = TypeCitations
	EventError     = "error"
	EventEnd       = "end"
)

// CitationsBody is the content of a citations event: the documents the
// answer cites, right after its message.
type CitationsBody struct {
	HistoryUID string     `json:"history_uid"`
	RunID      string     `json:"run_id"`
	Citations  []Citation `json:"citations"`
}

// TypeMessage is koe's own: a finished message of a turn (the human
// message, each tool call and result, the final answer).
const TypeMessage = "message"

// ChatRequest is the body of POST /api/chat/stream and /api/chat/invoke.
type ChatRequest struct {
	Message string `json:"message"`
	// ConfUID names the character ("": the default one).
	ConfUID string `json:"conf_uid,omitempty"`
	// HistoryUID continues a history ("": a new one, whose id the first
	// message event carries).
	HistoryUID string  `json:"history_uid,omitempty"`
	Images     []Image `json:"images,omitempty"`
	// StreamTokens: token events (default true).
	StreamTokens *bool `json:"stream_tokens,omitempty"`
	// CompressionRate sets the rate of summaries this turn starts
	// (memory.compression_rate when absent).
	CompressionRate *float64 `json:"compression_rate,omitempty"`
	// MCPPrompt, instead of Message, sends an MCP server's prompt, filled
	// with its arguments, as the user's turn (mcpprompts.go).
	MCPPrompt *MCPPromptRef `json:"mcp_prompt,omitempty"`
	// GroupID posts Message into a group of clients (the id group-update
	// names it by: "group_" and its founder's client_uid): every member's
	// character answers in turn, and every member sees and hears it.
	GroupID string `json:"group_id,omitempty"`
	// Name is who says Message in the group ("" = "Guest").
	Name string `json:"name,omitempty"`
}

// ChatEvent is one event of the stream.
type ChatEvent struct {
	Type    string `json:"type"`
	Content any    `json:"content"`
}

// Message types of ChatMessage.
const (
	MessageHuman  = "human"
	MessageAI     = "ai"
	MessageTool   = "tool"
	MessageCustom = "custom"
)

// Tool message statuses.
const (
	ToolSuccess = "success"
	ToolFailed  = "error"
)

// ChatMessage is a finished message.
type ChatMessage struct {
	Type    string `json:"type"`
	Content string `json:"content"`
	// ToolCalls are the calls an ai message made.
	ToolCalls []ChatToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Status belong to a tool message: the call it answers
	// and whether the tool succeeded.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Status     string `json:"status,omitempty"`
	// Name is the tool's name (tool messages) or the speaker's.
	Name string `json:"name,omitempty"`
	// RunID is the same for every message of one turn.
	RunID            string           `json:"run_id,omitempty"`
	ResponseMetadata ResponseMetadata `json:"response_metadata"`
	AdditionalKwargs AdditionalKwargs `json:"additional_kwargs"`
}

// ChatToolCall is one call of an ai message. Args is the arguments the
// model wrote: a JSON object, or a JSON string holding them when they are
// not valid JSON.
type ChatToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
	Type string          `json:"type"` // "tool_call"
}

// ResponseMetadata is what the LLM call that wrote an ai message reported.
type ResponseMetadata struct {
	// FinishReason is the server's ("stop", "length", "tool_calls"), or
	// "interrupted" when koe stopped the reply.
	FinishReason string      `json:"finish_reason,omitempty"`
	ModelName    string      `json:"model_name,omitempty"`
	TokenUsage   *TokenUsage `json:"token_usage,omitempty"`
}

// TokenUsage is one LLM call's token count, as its server reported it.
type TokenUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// AdditionalKwargs are koe's facts about a message.
type AdditionalKwargs struct {
	// ConfUID and HistoryUID say where the turn is stored: on the human
	// message and the final answer.
	ConfUID    string `json:"conf_uid,omitempty"`
	HistoryUID string `json:"history_uid,omitempty"`
	// Interrupted: the reply was cut short (a stop, a new input, a
	// client that left, an error); the text is what was said until then.
	Interrupted bool `json:"interrupted,omitempty"`
	// ID and Timestamp of a stored message (history reads).
	ID        uint64 `json:"id,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
	// Images the human message carried (history reads: their URLs).
	Images []HistoryImage `json:"images,omitempty"`
}

// MessageEvent is the koe.v1 WebSocket frame of a ChatMessage.
type MessageEvent struct {
	Type    string      `json:"type"`
	Content ChatMessage `json:"content"`
}

// ChatHistory is one history as the chat API reads it: its messages,
// oldest first, tool calls and results included.
type ChatHistory struct {
	ConfUID    string        `json:"conf_uid"`
	HistoryUID string        `json:"history_uid"`
	Messages   []ChatMessage `json:"messages"`
	// More: older messages exist (ask with ?before=<the first id>).
	More bool `json:"more"`
}

// StopResult answers POST /api/chat/{history_uid}/stop.
type StopResult struct {
	HistoryUID string `json:"history_uid"`
	Stopped    bool   `json:"stopped"`
}
