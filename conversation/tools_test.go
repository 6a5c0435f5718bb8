package conversation_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"koe/agent"
	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
	"koe/tools"
)

// withTools enables built-in tools for the rig's default character.
func withTools(enabled ...string) rigOption {
	return func(d *conversation.Deps) {
		d.Characters.(*mock.Characters).DefaultChar.Tools = tools.Config{Enabled: enabled}
	}
}

// A turn that calls the calculator: the OLV client sees the call running
// and then completed, a koe client its status too; what the model said
// before calling is spoken first; the history keeps everything said, and
// memory keeps the call, its result and the answer apart.
func TestToolTurn(t *testing.T) {
	r := newRig(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("Let me work that out."), ToolCalls: []fakellm.ToolCall{
			{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6 * 7"}`},
		}},
		fakellm.Reply{Tokens: fakellm.Words("It is 42.")},
		fakellm.Reply{Tokens: fakellm.Words("You are welcome.")},
	), withTools("calculator"))

	frames := r.turn("what is six times seven?")
	var statuses []protocol.ToolCallStatus
	var events []string
	var spoken []string
	for _, f := range frames {
		switch f.Type {
		case protocol.TypeToolCallStatus:
			var s protocol.ToolCallStatus
			mustUnmarshal(t, f.JSON, &s)
			statuses = append(statuses, s)
		case protocol.TypeStatus:
			var s protocol.Status
			mustUnmarshal(t, f.JSON, &s)
			events = append(events, s.Content.TaskID+" "+s.Content.State)
		case protocol.TypeAudio:
			var a protocol.Audio
			mustUnmarshal(t, f.JSON, &a)
			spoken = append(spoken, a.DisplayText.Text)
		}
	}
	if len(statuses) != 2 {
		t.Fatalf("tool_call_status frames: %+v", statuses)
	}
	run, done := statuses[0], statuses[1]
	if run.ToolID != "call_1" || run.ToolName != "calculator" || run.Status != "running" || run.Content != `Input: {"expression":"6 * 7"}` || run.Name != "Koe" {
		t.Errorf("running: %+v", run)
	}
	if done.ToolID != "call_1" || done.Status != "completed" || done.Content != "42" {
		t.Errorf("completed: %+v", done)
	}
	for _, s := range statuses {
		if _, err := time.Parse(time.RFC3339Nano, s.Timestamp); err != nil {
			t.Errorf("timestamp %q: %v", s.Timestamp, err)
		}
	}
	if want := []string{"llm:1 start", "llm:1 end", "tool:call_1 start", "tool:call_1 end", "llm:2 start", "llm:2 end"}; !reflect.DeepEqual(events, want) {
		t.Errorf("status events %q, want %q", events, want)
	}
	// The turn's finished messages, as the chat API streams them.
	var msgs []string
	runID := ""
	for _, f := range frames {
		if f.Type != protocol.TypeMessage {
			continue
		}
		var m protocol.MessageEvent
		mustUnmarshal(t, f.JSON, &m)
		c := m.Content
		desc := c.Type + ":" + c.Content
		for _, tc := range c.ToolCalls {
			desc += " call " + tc.ID + " " + tc.Name + string(tc.Args)
		}
		if c.Type == protocol.MessageTool {
			desc += " (" + c.ToolCallID + " " + c.Name + " " + c.Status + ")"
		}
		if c.ResponseMetadata.FinishReason != "" {
			desc += " [" + c.ResponseMetadata.FinishReason + "]"
		}
		msgs = append(msgs, desc)
		if runID == "" {
			runID = c.RunID
		}
		if c.RunID == "" || c.RunID != runID {
			t.Errorf("message %q has run_id %q, the turn's first %q", desc, c.RunID, runID)
		}
	}
	wantMsgs := []string{
		"human:what is six times seven?",
		`ai:Let me work that out. call call_1 calculator{"expression":"6 * 7"} [tool_calls]`,
		"tool:42 (call_1 calculator success)",
		"ai:It is 42. [stop]",
	}
	if !reflect.DeepEqual(msgs, wantMsgs) {
		t.Errorf("message events\n got %q\nwant %q", msgs, wantMsgs)
	}
	if got := strings.Join(spoken, " "); got != "Let me work that out. It is 42." {
		t.Errorf("spoken %q", spoken)
	}
	var streamed strings.Builder
	for _, f := range frames {
		if f.Type == protocol.TypeToken {
			var tok protocol.Token
			mustUnmarshal(t, f.JSON, &tok)
			streamed.WriteString(tok.Content)
		}
	}
	if streamed.String() != "Let me work that out. It is 42." {
		t.Errorf("token frames join to %q, want the reply as stored", streamed.String())
	}
	// The preamble was spoken before the tool ran.
	var order []string
	for _, f := range frames {
		if f.Type == protocol.TypeAudio || f.Type == protocol.TypeToolCallStatus {
			order = append(order, f.Type)
		}
	}
	if len(order) < 3 || order[0] != protocol.TypeAudio || order[1] != protocol.TypeToolCallStatus {
		t.Errorf("frame order %q: the preamble goes out before the call", order)
	}
	if got := aiRecords(r.records()); !reflect.DeepEqual(got, []string{"Let me work that out. It is 42."}) {
		t.Errorf("history: %q", got)
	}

	// Memory rebuilt from the history is the memory the turn left.
	r.dispatch(protocol.Inbound{Type: protocol.TypeFetchAndSetHistory, HistoryUID: r.sess.Info().HistoryUID})
	r.until(protocol.TypeHistoryData, "")
	recs := r.records()
	var roles []string
	for _, rec := range recs {
		roles = append(roles, rec.Role)
	}
	if !reflect.DeepEqual(roles, []string{"metadata", "human", "tool_call", "tool", "ai"}) {
		t.Errorf("stored roles %q", roles)
	}
	r.turn("thanks")
	reqs := r.llm.Requests()
	last := reqs[len(reqs)-1]
	var sent []string
	for _, m := range last.Messages[1:] {
		line := m.Role + ": " + m.Content
		if len(m.ToolCalls) > 0 {
			line += " [calls " + m.ToolCalls[0].Name + "]"
		}
		sent = append(sent, line)
	}
	want := []string{
		"user: what is six times seven?",
		"assistant: Let me work that out. [calls calculator]",
		"tool: " + toolElided(t, last),
		"assistant: It is 42.",
		"user: You are Koe.\n\nthanks",
	}
	if !reflect.DeepEqual(sent, want) {
		t.Errorf("the next request:\n%s\nwant:\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
	}
	if !reflect.DeepEqual(last.Tools, []string{"calculator"}) {
		t.Errorf("tools offered: %q", last.Tools)
	}
}

// toolElided is the text an earlier turn's tool result is replaced by, as
// found in req (it must not be the result itself).
func toolElided(t *testing.T, req fakellm.Request) string {
	t.Helper()
	for _, m := range req.Messages {
		if m.Role == "tool" {
			if m.Content == "42" {
				t.Errorf("an earlier turn's tool result was sent whole")
			}
			return m.Content
		}
	}
	t.Error("no tool message in the request")
	return ""
}

// A character whose tools are misnamed is refused when it is loaded, with
// the key that is wrong.
func TestToolsValidated(t *testing.T) {
	c := character("c9", "http://127.0.0.1:1/v1")
	c.TTS.Engine = "none"
	c.Tools.Enabled = []string{"calculator", "weather"}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "tools.enabled") || !strings.Contains(err.Error(), `"weather"`) {
		t.Errorf("Validate: %v", err)
	}
}

// A model that calls a tool without a word first: with tools.spoken_filler
// the filler is spoken while the tool runs, and it is not part of the
// reply in the history or in memory.
func TestSpokenFiller(t *testing.T) {
	r := newRig(t, fakellm.Script(
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c", Name: "get_current_datetime", Arguments: `{"timezone":"UTC"}`}}},
		fakellm.Reply{Tokens: fakellm.Words("It is late.")},
	), func(d *conversation.Deps) {
		ch := &d.Characters.(*mock.Characters).DefaultChar
		ch.Tools = tools.Config{Enabled: []string{"get_current_datetime"}, SpokenFiller: "Let me check."}
	})
	var spoken []string
	for _, f := range r.turn("what time is it?") {
		if f.Type == protocol.TypeAudio {
			var a protocol.Audio
			mustUnmarshal(t, f.JSON, &a)
			spoken = append(spoken, a.DisplayText.Text)
		}
	}
	if !reflect.DeepEqual(spoken, []string{"Let me check.", "It is late."}) {
		t.Errorf("spoken %q", spoken)
	}
	if got := aiRecords(r.records()); !reflect.DeepEqual(got, []string{"It is late."}) {
		t.Errorf("history %q", got)
	}
}

// serverTools stands in for the MCP servers: one tool per enabled server.
type serverTools struct{}

func (serverTools) Toolbox(servers []string) agent.Toolbox {
	return serverBox(servers)
}

type serverBox []string

func (b serverBox) Specs() []agent.ToolSpec {
	var out []agent.ToolSpec
	for _, s := range b {
		out = append(out, agent.ToolSpec{Name: s + "__echo", Description: "Echoes."})
	}
	return out
}

func (b serverBox) Call(_ context.Context, c agent.ToolCall) (string, error) {
	return "echo from " + c.Name, nil
}

// A character's MCP servers' tools are offered with its built-in ones,
// and their calls reach the server.
func TestServerToolsJoinBuiltins(t *testing.T) {
	r := newRig(t, fakellm.Script(
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c", Name: "files__echo", Arguments: `{}`}}},
		fakellm.Reply{Tokens: fakellm.Words("Done.")},
	), func(d *conversation.Deps) {
		d.ToolServers = serverTools{}
		ch := &d.Characters.(*mock.Characters).DefaultChar
		ch.Tools = tools.Config{Enabled: []string{"calculator"}, MCPServers: []string{"files"}}
	})
	r.turn("echo something")
	reqs := r.llm.Requests()
	if !reflect.DeepEqual(reqs[0].Tools, []string{"calculator", "files__echo"}) {
		t.Errorf("tools offered: %q", reqs[0].Tools)
	}
	m := reqs[1].Messages
	if last := m[len(m)-1]; last.Role != "tool" || last.Content != "echo from files__echo" {
		t.Errorf("the server's result went back as %+v", last)
	}
}
