package conversation_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/agent"
	"koe/conversation"
	"koe/mcp"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/everythingtest"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/mock"
	"koe/tools"
)

// withSamplingEverything connects the rig to the MCP project's reference server,
// allowed to sample, and enables it for a character that sees images.
func withSamplingEverything(t *testing.T) rigOption {
	t.Helper()
	node, entry := everythingtest.Find(t)
	cfg := mcp.Config{
		Servers: map[string]mcp.ServerConfig{"everything": {Command: node, Args: []string{entry, "stdio"},
			ServerHost: mcp.ServerHost{Sampling: true}}},
		HostLimits: mcp.HostLimits{ProgressInterval: time.Nanosecond},
	}
	m, err := mcp.Start(context.Background(), cfg, koetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	tb := m.Toolbox([]string{"everything"})
	testkit.Eventually(t, "the sampling tool offered", func() bool {
		return slices.ContainsFunc(tb.Specs(), func(s agent.ToolSpec) bool { return s.Name == "everything__trigger-sampling-request" })
	})
	return func(d *conversation.Deps) {
		d.ToolServers = m
		ch := &d.Characters.(*mock.Characters).DefaultChar
		// Its sampling tool says it is not read-only: allowed, it runs
		// without asking the user first (tools.allow).
		ch.Tools = tools.Config{MCPServers: []string{"everything"}, Allow: []string{"everything__*"}}
		ch.LLM.Vision = true
	}
}

// A turn whose calls report progress, sample the character's model and
// return an image: the koe client sees the progress on the call's status
// and the sampling as a status of its own; the model answers the server's
// request and then sees the image with the results; the OLV client's
// tool_call_status frames are as ever, running then completed.
func TestMCPHostTurn(t *testing.T) {
	opt := withSamplingEverything(t)
	r := newRig(t, fakellm.Script(
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{
			{ID: "call_1", Name: "everything__trigger-long-running-operation", Arguments: `{"duration":1,"steps":2}`},
			{ID: "call_2", Name: "everything__trigger-sampling-request", Arguments: `{"prompt":"six times seven?","maxTokens":50}`},
			{ID: "call_3", Name: "everything__get-tiny-image", Arguments: `{}`},
		}},
		fakellm.Reply{Tokens: []string{"Forty-two."}},
		fakellm.Reply{Tokens: fakellm.Words("All done.")},
	), opt)
	frames := r.turn("go")
	var events []string
	olv := map[string][]string{}
	for _, f := range frames {
		switch f.Type {
		case protocol.TypeStatus:
			var s protocol.Status
			mustUnmarshal(t, f.JSON, &s)
			events = append(events, s.Content.TaskID+" "+s.Content.State+": "+s.Content.Content)
		case protocol.TypeToolCallStatus:
			var s protocol.ToolCallStatus
			mustUnmarshal(t, f.JSON, &s)
			olv[s.ToolID] = append(olv[s.ToolID], s.Status)
		}
	}
	has := func(prefix, part string) bool {
		return slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, prefix) && strings.Contains(e, part) })
	}
	if !has("tool:call_1 progress: ", "of 2") {
		t.Errorf("no progress of call_1 in %q", events)
	}
	if !has("sampling:everything:1 start: ", "asks the model") || !has("sampling:everything:1 end: ", "") {
		t.Errorf("no sampling status in %q", events)
	}
	for _, id := range []string{"call_1", "call_2", "call_3"} {
		if got := strings.Join(olv[id], ","); got != "running,completed" {
			t.Errorf("OLV's frames of %s: %s", id, got)
		}
	}
	reqs := r.llm.Requests()
	if len(reqs) != 3 || reqs[1].Stream || !strings.Contains(reqs[1].Messages[len(reqs[1].Messages)-1].Content, "six times seven?") {
		t.Fatalf("%d LLM requests; the second should be the server's", len(reqs))
	}
	last := reqs[2].Messages
	var tool, images int
	for i, m := range last {
		if m.Role == "tool" {
			tool = i
		}
		if m.Images > 0 {
			images = i
		}
	}
	if images != tool+1 || last[images].Images != 1 {
		t.Errorf("the image went as message %d (%+v), the last result is %d", images, last[images], tool)
	}
}
