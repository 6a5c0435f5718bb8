package agent

import "encoding/json"

// Request is one call to the LLM as the agent builds it: what package llm
// turns into an OpenAI-compatible chat request. The agent never sees the
// wire library's types; only the LLM edge does.
type Request struct {
	// Messages in the order sent: one system message first, then user and
	// assistant alternating, starting with a user message (an assistant's
	// tool calls and their results count as the assistant's side).
	Messages []WireMessage
	// Tools the model may call in this cycle (none: a plain answer).
	Tools []ToolSpec
	// ToolChoice is "" (the server decides, which is "auto" when tools are
	// offered), ToolChoiceNone (the tools are described but the model
	// must answer in text), ToolChoiceAuto or ToolChoiceRequired (it must
	// call one), as a client's tool_choice asks.
	ToolChoice string
	// ToolFunction, if set, is the one function the model must call (a
	// client's tool_choice naming it); it overrides ToolChoice.
	ToolFunction string
	// Temperature, if set, overrides the character's temperature (the
	// router asks at 0 so that its answer is repeatable).
	Temperature *float32
	// JSONSchema, if set, asks for a structured answer of that schema.
	JSONSchema *JSONSchema
	// MaxTokens, if set, bounds the reply below the character's own
	// limit (an MCP server's sampling request asks for a length).
	MaxTokens int
}

// JSONSchema names the schema a structured answer must follow.
type JSONSchema struct {
	Name   string
	Schema json.RawMessage
}

// ToolChoiceNone makes the model answer without calling a tool.
const ToolChoiceNone = "none"

// StreamResult is what a streamed reply gave besides its text.
type StreamResult struct {
	// ToolCalls are the model's complete function calls, in its order.
	ToolCalls []ToolCall
	// Usage is what the server reported (nil if it did not).
	Usage *Usage
	// FinishReason is why the server ended the reply ("stop", "length",
	// "tool_calls"; "" if it did not say).
	FinishReason string
}

// WireMessage is one message of a Request: the request's shape of a
// memory Message, with images resolved into content parts or notes.
type WireMessage struct {
	Role string
	// Content is the text, used when Parts is empty.
	Content string
	// Parts, when set, replace Content: text and images in order (a user
	// message carrying images the model can see).
	Parts []ContentPart
	// ToolCalls are set on an assistant message that calls tools.
	ToolCalls []ToolCall
	// ToolCallID and Name are set on a tool result: the call it answers
	// and the tool's name.
	ToolCallID string
	Name       string
}

// Text is the message's text: Content, or its text parts joined by a
// blank line.
func (m WireMessage) Text() string {
	if len(m.Parts) == 0 {
		return m.Content
	}
	text := ""
	for _, p := range m.Parts {
		if p.ImageURL == "" {
			text = joinText(text, p.Text)
		}
	}
	return text
}

// ContentPart is a piece of a multi-part message: text, or an image when
// ImageURL is set.
type ContentPart struct {
	Text string
	// ImageURL is a data: URL (data:image/png;base64,…) or an http(s) URL.
	ImageURL string
	// Detail tells the model how closely to look ("" = the server's
	// default); it also decides what the image costs in tokens.
	Detail ImageDetail
}

// ImageDetail is OpenAI's image "detail" setting.
type ImageDetail string

// Image detail levels.
const (
	ImageDetailAuto ImageDetail = "auto"
	ImageDetailLow  ImageDetail = "low"
	ImageDetailHigh ImageDetail = "high"
)

// ToolSpec describes a function the model may call.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments (an object schema);
	// nil means none.
	Parameters json.RawMessage
	// Source names who offers the tool, for people ("MCP server search");
	// "" is koe's own. It is not sent.
	Source string
	// Changes says the tool changes things (an MCP tool annotated as
	// destructive or not read-only): a call waits for the user's yes
	// unless the character allows it (see Guard). It is not sent.
	Changes bool
}

// joinText joins two pieces of text with a blank line, skipping empty
// ones, the way merged messages read.
func joinText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}
