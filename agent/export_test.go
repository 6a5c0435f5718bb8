package agent

// What the external tests (package agent_test, which may import package
// llm and so talk to the fake LLM over HTTP) need to see of the inside.

// Texts the model sees in place of what it no longer gets.
const (
	ToolResultGone       = toolResultGone
	InterruptedNote      = interruptedNote
	InterruptedEmptyNote = interruptedEmptyNote
	ContextMargin        = contextMargin
)

// FillNames fills {character} and {human} in a prompt.
var FillNames = fillNames

// Turn and SplitTurns group messages into turns as the agent does.
type Turn = turn

var SplitTurns = splitTurns

// Append adds messages to memory as they are, e.g. a turn's tool calls
// and results: the tool loop that will add them is not written yet.
func (a *Agent) Append(msgs ...Message) {
	for _, m := range msgs {
		a.add(m)
	}
}

// BuildContext builds the next request with tools, as a cycle of Reply
// that may call them does.
func (a *Agent) BuildContext(tools []ToolSpec) (Request, *ContextReport, error) {
	return a.buildContext(tools, toolsNote(tools, false), "", "", nil)
}

// SetCalibration sets the ratio learnt from provider-reported usage.
func (a *Agent) SetCalibration(c float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calibration = c
}

// CachedText reports the entries and bytes in t's count cache.
func (t *Tokenizer) CachedText() (entries, bytes int) {
	t.enc.mu.Lock()
	defer t.enc.mu.Unlock()
	return len(t.enc.counts), t.enc.bytes
}

// ToolsNote is the line that tells the model which tools it may call.
var ToolsNote = toolsNote
