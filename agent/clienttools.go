package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
)

// Client tools are functions a client defines and runs itself (a Realtime
// API client's "tools"): the model is offered them next to the
// character's own, but when it calls one, koe does not run it. The turn
// ends handing the call out (ClientCallEmitter); the client's result joins
// memory later (AddToolResult) and the next turn continues from it with no
// new user message. Until then the call is pending: it is in memory and in
// the history like any call, with no result yet.

// ClientTools are what one turn offers besides the character's tools.
type ClientTools struct {
	// Specs are the client's functions (Source is ignored: they are the
	// client's).
	Specs []ToolSpec
	// Choice is the client's tool_choice.
	Choice ToolChoice
}

// ToolChoice is how the model must use the tools in the first LLM call of
// a turn: Mode is "" or ToolChoiceAuto (it decides), ToolChoiceNone (it
// must answer in text), ToolChoiceRequired (it must call one); Function,
// when set, is the one it must call. Later cycles of the same turn are
// left to the model: forcing a call there would loop until llm.max_cycles.
type ToolChoice struct {
	Mode     string
	Function string
}

// Tool choice modes besides ToolChoiceNone.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
)

// ClientCallEmitter is an Emitter that takes the calls of client tools.
// ClientCalls is called from Reply's goroutine, once, as the turn's last
// event: after ToolsCalled for the cycle and after that cycle's own tools
// (if any) have run.
type ClientCallEmitter interface {
	Emitter
	ClientCalls(calls []ToolCall)
}

// ErrUnknownCall is AddToolResult's error for a call id that no pending
// call has.
var ErrUnknownCall = errors.New("no call waits for a result with that call_id")

// ErrNoClientEmitter: a turn offered client tools to an emitter that
// could not hand their calls out.
var ErrNoClientEmitter = errors.New("client tools need an emitter that takes their calls")

// toolName is the function names OpenAI accepts, which every
// OpenAI-compatible server expects.
var toolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// Validate checks the client's tools: names as OpenAI allows them, no name
// twice, parameters a JSON object, at most maxTools (llm.max_tools) of
// them, and a tool_choice that names one of them.
func (c ClientTools) Validate(maxTools int) error {
	if maxTools > 0 && len(c.Specs) > maxTools {
		return fmt.Errorf("%d tools: at most %d may be offered (llm.max_tools)", len(c.Specs), maxTools)
	}
	seen := make(map[string]bool, len(c.Specs))
	for i, s := range c.Specs {
		if !toolName().MatchString(s.Name) {
			return fmt.Errorf("tools[%d]: the name %q is not 1 to 64 letters, digits, _ or -", i, s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("tools[%d]: %q is defined twice", i, s.Name)
		}
		seen[s.Name] = true
		if len(s.Parameters) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(s.Parameters, &obj); err != nil {
				return fmt.Errorf("tools[%d] (%s): parameters must be a JSON schema object", i, s.Name)
			}
		}
	}
	switch c.Choice.Mode {
	case "", ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
	default:
		return fmt.Errorf("tool_choice %q is not auto, none, required or a function", c.Choice.Mode)
	}
	if f := c.Choice.Function; f != "" && !seen[f] {
		return fmt.Errorf("tool_choice names the function %q, which is not among the tools", f)
	}
	return nil
}

// names is the set of the client's function names.
func (c ClientTools) names() map[string]bool {
	if len(c.Specs) == 0 {
		return nil
	}
	m := make(map[string]bool, len(c.Specs))
	for _, s := range c.Specs {
		m[s.Name] = true
	}
	return m
}

// withClientTools puts the client's tools first and koe's after them, less
// those whose name a client tool takes: the client defined that name for
// its session and expects the calls to it.
func withClientTools(client []ToolSpec, own []ToolSpec) []ToolSpec {
	if len(client) == 0 {
		return own
	}
	taken := make(map[string]bool, len(client))
	out := make([]ToolSpec, 0, len(client)+len(own))
	for _, s := range client {
		s.Source = "client"
		s.Changes = false
		taken[s.Name] = true
		out = append(out, s)
	}
	for _, s := range own {
		if !taken[s.Name] {
			out = append(out, s)
		}
	}
	return out
}

// PendingCalls are the calls of the current turn that have no result yet:
// client tools' calls waiting for the client (koe's own always get one).
// A turn that has its final reply has none: a call left without a result
// there (a history cut short) is left out of every request instead.
func (a *Agent) PendingCalls() []ToolCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pendingCallsLocked()
}

func (a *Agent) pendingCallsLocked() []ToolCall {
	if n := len(a.msgs); n == 0 || a.msgs[n-1].endsTurn() {
		return nil
	}
	start := 0
	for i := len(a.msgs) - 1; i >= 0; i-- {
		if a.msgs[i].Role == RoleUser {
			start = i
			break
		}
	}
	answered := map[string]bool{}
	var calls []ToolCall
	for _, m := range a.msgs[start:] {
		if m.Role == RoleTool {
			answered[m.ToolCallID] = true
		}
		calls = append(calls, m.ToolCalls...)
	}
	pending := calls[:0:0]
	for _, c := range calls {
		if !answered[c.ID] {
			pending = append(pending, c)
		}
	}
	return pending
}

// AddToolResult adds the client's result of a pending call to memory,
// after the call, and returns the call. A call id no pending call has is
// ErrUnknownCall.
func (a *Agent) AddToolResult(callID, output string) (ToolCall, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.pendingCallsLocked() {
		if c.ID == callID {
			a.msgs = append(a.msgs, Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: output, Time: a.opts.Now()})
			return c, nil
		}
	}
	return ToolCall{}, fmt.Errorf("%w: %q", ErrUnknownCall, callID)
}

// ClosePendingCalls gives every pending call the result "Error: <reason>",
// as an interrupted tool's, and returns those calls with the text: a call
// never travels without its result. Call it before a new user message.
func (a *Agent) ClosePendingCalls(reason error) (calls []ToolCall, text string) {
	text = ToolResultText("", reason)
	a.mu.Lock()
	defer a.mu.Unlock()
	calls = a.pendingCallsLocked()
	for _, c := range calls {
		a.msgs = append(a.msgs, Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: text, Time: a.opts.Now()})
	}
	return calls, text
}

// ErrNoClientResult closes a client's call that had no result when the
// user spoke again.
var ErrNoClientResult = errors.New("the client gave no result before the conversation went on")
