package conversation

import (
	"context"
	"sync"

	"koe"
	"koe/agent"
	"koe/histories"
	"koe/protocol"
	"koe/tools"
)

// A client may define tools it runs itself (a Realtime API client's
// functions, given with each Response). Its turns offer them to the model
// beside the character's tools; when the model calls one, the turn's own
// tools of that cycle run as ever, the call is stored with them (a
// tool_call record), the client is handed it (a client-tool-calls event)
// and the turn ends with no answer. The client's result (SubmitToolResult)
// waits for the next turn: a Response with no words then starts one with
// no new user message, whose model call reads the result after the call;
// a new user message instead first stores the results given and closes
// the calls still waiting, as an interrupted tool's are closed, so that no
// call is ever left without a result.

// clientSide is the client's tool results waiting for the next turn, in
// the order given.
type clientSide struct {
	mu      sync.Mutex
	results []clientResult
}

type clientResult struct{ callID, output string }

// SubmitToolResult takes the client's result of a call it was handed. It
// joins the history at the next turn's start (a Response goes on from it,
// or the user's next message comes after it). A call id that no call
// waits for, or one given a result already, is refused. A result longer
// than the character's tools.max_result_chars is cut, saying so.
func (s *Session) SubmitToolResult(callID, output string) error {
	c, _ := s.current()
	pending := c.agent.PendingCalls()
	// Bounded as the character's own tools' results are.
	output = tools.CutResult(output, c.char.Tools.MaxResultChars)
	s.client.mu.Lock()
	defer s.client.mu.Unlock()
	for _, r := range s.client.results {
		if r.callID == callID {
			return invalid("the call %q has a result already", callID)
		}
	}
	for _, c := range pending {
		if c.ID == callID {
			s.client.results = append(s.client.results, clientResult{callID: callID, output: output})
			return nil
		}
	}
	return invalid("no function call waits for a result with call_id %q", callID)
}

// resultsGiven reports whether the client gave results since the last
// turn began.
func (s *Session) resultsGiven() bool {
	s.client.mu.Lock()
	defer s.client.mu.Unlock()
	return len(s.client.results) > 0
}

// turnTools is what a turn offers of the client's tools.
func turnTools(in turnInput) agent.ClientTools {
	if in.tools != nil {
		return *in.tools
	}
	return agent.ClientTools{}
}

// settleCalls brings the client's results into memory and closes the calls
// left without one, returning their records to store ahead of the turn's
// own, in order. A result whose call memory no longer holds (the history
// was switched or read again) is dropped.
func (s *Session) settleCalls(c cast) []koe.Record {
	s.client.mu.Lock()
	results := s.client.results
	s.client.results = nil
	s.client.mu.Unlock()
	var recs []koe.Record
	for _, r := range results {
		call, err := c.agent.AddToolResult(r.callID, r.output)
		if err != nil {
			s.log.Info("a client's tool result no longer has its call", "call_id", r.callID, "err", err)
			continue
		}
		recs = append(recs, koe.Record{Role: koe.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: r.output})
	}
	closed, text := c.agent.ClosePendingCalls(agent.ErrNoClientResult)
	for _, call := range closed {
		recs = append(recs, koe.Record{Role: koe.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: text})
	}
	return recs
}

// errNothingToContinue: a turn to go on from results found none (the
// history changed since the results were given).
var errNothingToContinue = koe.Errorf(koe.Invalid, "no function call output to continue from: the conversation changed since it was given")

// showResults tells the turn's audience of the results it begins with.
func (s *Session) showResults(ctx context.Context, st *turnState) {
	for _, r := range st.settled {
		m := histories.ToolResultMessage(r, st.run)
		if r.Content == agent.ToolResultText("", agent.ErrNoClientResult) {
			m.Status = protocol.ToolFailed
		}
		s.message(ctx, m)
	}
}

// ClientCalls hands the client its calls: the turn ends here with no
// answer of its own (see runTurn).
func (e *turnEmitter) ClientCalls(calls []agent.ToolCall) {
	e.st.clientCalls = true
	ev := protocol.ClientToolCalls{Type: protocol.TypeClientToolCalls, RunID: e.st.run, Calls: make([]protocol.ClientToolCall, len(calls))}
	for i, c := range calls {
		ev.Calls[i] = protocol.ClientToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	}
	e.now(ev)
}
