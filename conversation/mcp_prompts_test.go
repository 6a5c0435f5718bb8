package conversation_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"koe"
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

// withEverything gives the rig server-everything as "everything", and a
// server that never starts as "down"; every character enables both. It
// returns a wait for server-everything to be connected.
func withEverything(t *testing.T) (rigOption, func()) {
	t.Helper()
	command, args := everythingtest.Stdio(t)
	cfg := mcp.ServerConfig{Command: command, Args: args}
	m, err := mcp.Start(context.Background(), mcp.Config{Servers: map[string]mcp.ServerConfig{
		"everything": cfg, "down": {Command: "/nonexistent/koe-mcp-server"}}}, koetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	opt := func(d *conversation.Deps) {
		d.ToolServers = m
		chars := d.Characters.(*mock.Characters)
		chars.DefaultChar.Tools = tools.Config{MCPServers: []string{"everything", "down"}}
		for name, ch := range chars.Files {
			ch.Tools = chars.DefaultChar.Tools
			chars.Files[name] = ch
		}
	}
	ready := func() {
		t.Helper()
		tb := m.Toolbox([]string{"everything"})
		testkit.Eventually(t, "server-everything connected", func() bool {
			return slices.ContainsFunc(tb.Specs(), func(s agent.ToolSpec) bool { return s.Name == "everything__echo" })
		})
	}
	return opt, ready
}

// systemOf is the LLM's last request's messages, where the persona is
// (in the system message or before the first user message).
func systemOf(r *rig) string {
	reqs := r.llm.Requests()
	var all []string
	for _, m := range reqs[len(reqs)-1].Messages {
		all = append(all, m.Content)
	}
	return strings.Join(all, "\n")
}

// A character's persona is an MCP prompt once its server is connected;
// while it is not, persona_prompt stands in.
func TestPersonaFromMCPPrompt(t *testing.T) {
	opt, ready := withEverything(t)
	persona := func(d *conversation.Deps) {
		chars := d.Characters.(*mock.Characters)
		chars.DefaultChar.PersonaPromptFrom = &protocol.MCPPromptRef{Server: "down", Prompt: "anything"}
		other := chars.Files["other.yaml"]
		other.PersonaPromptFrom = &protocol.MCPPromptRef{Server: "everything", Prompt: "args-prompt", Arguments: map[string]string{"city": "Kyoto"}}
		chars.Files["other.yaml"] = other
	}
	r := newRig(t, fakellm.Echo(0), opt, persona)
	ready()
	r.turn("hello")
	if sys := systemOf(r); !strings.Contains(sys, "You are Koe.") {
		t.Errorf("with its server down, the persona is not persona_prompt: %q", sys)
	}
	r.dispatch(protocol.Inbound{Type: protocol.TypeSwitchConfig, File: "other.yaml"})
	r.until(protocol.TypeConfigSwitched, "")
	r.turn("hello again")
	if sys := systemOf(r); !strings.Contains(sys, "What's weather in Kyoto?") || strings.Contains(sys, "You are Koe.") {
		t.Errorf("the persona is not the MCP prompt: %q", sys)
	}
}

// koe's page lists the character's servers' prompts and sends one, filled
// in, as the user's turn: the LLM and the history get its text.
func TestUseMCPPrompt(t *testing.T) {
	opt, ready := withEverything(t)
	r := newRig(t, fakellm.Echo(0), opt)
	ready()
	var list protocol.MCPPrompts
	r.answer(protocol.Inbound{Type: protocol.TypeFetchMCPPrompts}, protocol.TypeMCPPrompts, &list)
	if !slices.ContainsFunc(list.Prompts, func(p protocol.MCPPrompt) bool { return p.Server == "everything" && p.Name == "args-prompt" }) {
		t.Errorf("no args-prompt listed: %+v", list.Prompts)
	}
	if len(list.Unavailable) != 1 || !strings.Contains(list.Unavailable[0], "MCP server down is not connected") {
		t.Errorf("unavailable: %q", list.Unavailable)
	}

	r.dispatch(protocol.Inbound{Type: protocol.TypeUseMCPPrompt, MCPPrompt: &protocol.MCPPromptRef{
		Server: "everything", Prompt: "args-prompt", Arguments: map[string]string{"city": "Kyoto", "state": "Kansai"}}})
	r.until(protocol.TypeBackendSynthComplete, "")
	played(r.sess)
	r.until(protocol.TypeControl, protocol.ControlChainEnd)
	const want = "What's weather in Kyoto, Kansai?"
	reqs := r.llm.Requests()
	msgs := reqs[len(reqs)-1].Messages
	// The persona comes before the first user message.
	if got := msgs[len(msgs)-1]; got.Role != "user" || !strings.HasSuffix(got.Content, "\n"+want) {
		t.Errorf("the LLM got %+v, want the prompt's text", got)
	}
	recs := r.records()
	if i := slices.IndexFunc(recs, func(rec koe.Record) bool { return rec.Role == koe.RoleHuman }); i < 0 || recs[i].Content != want {
		t.Errorf("stored: %+v", recs)
	}

	for _, c := range []struct {
		ref  *protocol.MCPPromptRef
		want string
	}{
		{nil, `"mcp_prompt" is missing`},
		{&protocol.MCPPromptRef{Server: "elsewhere", Prompt: "p"}, `MCP server "elsewhere" is not one the character c1 enables (tools.mcp_servers)`},
		{&protocol.MCPPromptRef{Server: "everything", Prompt: "args-prompt"}, "the MCP prompt: MCP server everything: prompt \"args-prompt\""},
		{&protocol.MCPPromptRef{Server: "down", Prompt: "p"}, "the MCP prompt: MCP server down is not connected"},
	} {
		err := r.sess.Dispatch(protocol.Inbound{Type: protocol.TypeUseMCPPrompt, MCPPrompt: c.ref})
		if p := conversation.Explain(err); p.Kind != koe.Invalid || !strings.Contains(p.Message, c.want) {
			t.Errorf("%+v: %+v, want %q", c.ref, p, c.want)
		}
	}

	// A chat request sends a message or a prompt, not both.
	_, err := r.hub.OpenChat(r.ctx, protocol.ChatRequest{Message: "hi", MCPPrompt: &protocol.MCPPromptRef{Server: "everything", Prompt: "simple-prompt"}}, mock.NewSender(16))
	if p := conversation.Explain(err); p.Kind != koe.Invalid || !strings.Contains(p.Message, `send "message" or "mcp_prompt", not both`) {
		t.Errorf("message and mcp_prompt: %+v", p)
	}
}
