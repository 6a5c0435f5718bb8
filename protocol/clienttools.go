package protocol

// TypeClientToolCalls (koe's own event) tells that the model called tools
// the client defined and runs itself: koe did not run them, and the turn
// ends without an answer until the client gives their results.
const TypeClientToolCalls = "client-tool-calls"

// ClientToolCalls hands a turn's calls of client tools out.
type ClientToolCalls struct {
	Type  string           `json:"type"`
	RunID string           `json:"run_id"`
	Calls []ClientToolCall `json:"calls"`
}

// ClientToolCall is one call: its id (which the result names), the
// function and its arguments as the model wrote them (JSON text).
type ClientToolCall struct {
	ID        string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}
