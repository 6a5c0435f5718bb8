package protocol

// koe's messages for a question the character puts to its user while
// tools run: a confirmation before a tool that changes things, or an MCP
// server's question (elicitation). The question is also spoken and shown
// as an audio piece, so OLV clients hear and read it; these let koe's
// page offer it as buttons.
const (
	// TypeAsk (out): a question waits for the user's answer.
	TypeAsk = "ask"
	// TypeAskEnd (out): the question was answered, declined, cancelled
	// or timed out; clients stop offering it.
	TypeAskEnd = "ask-end"
	// TypeAskAnswer (in): a click on a question's button; typed or
	// spoken words answer it as text-input and mic-audio-end do.
	TypeAskAnswer = "ask-answer"
)

// Kinds of Ask.
const (
	AskConfirm = "confirm"
	AskElicit  = "elicit"
)

// Ask is a question waiting for the user.
type Ask struct {
	Type  string `json:"type"`
	AskID string `json:"ask_id"`
	// Kind is AskConfirm or AskElicit.
	Kind string `json:"kind"`
	Text string `json:"text"`
	// ToolID and ToolName are the call the question is about.
	ToolID   string `json:"tool_id,omitempty"`
	ToolName string `json:"tool_name,omitempty"`
	// Source names who asks ("MCP server files").
	Source string `json:"source,omitempty"`
	// Options are choices to offer as buttons.
	Options []string `json:"options,omitempty"`
	// TimeoutMillis is how long the question waits before it is declined.
	TimeoutMillis int64 `json:"timeout_ms"`
}

// AskEnd says how a question ended: action is accept, decline or cancel.
type AskEnd struct {
	Type   string `json:"type"`
	AskID  string `json:"ask_id"`
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
}
