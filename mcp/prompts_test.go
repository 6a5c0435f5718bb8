package mcp

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"koe/protocol"
)

// promptsOf lists the prompts of the named servers within the hang guard.
func promptsOf(t testing.TB, m *Manager, servers ...string) protocol.MCPPrompts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	return m.Prompts(ctx, servers)
}

// getPrompt gets a prompt within the hang guard.
func getPrompt(t testing.TB, m *Manager, server, prompt string, args map[string]string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	return m.GetPrompt(ctx, protocol.MCPPromptRef{Server: server, Prompt: prompt, Arguments: args})
}

// server-everything's prompts are listed with their arguments, and one
// is got filled with them; the server's own refusal (a required argument
// missing) comes back as an error.
func TestEverythingPrompts(t *testing.T) {
	cfg := everythingStdio(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"everything": cfg}}, defaultTiming)
	waitForTool(t, m, m.Toolbox([]string{"everything"}), "everything__echo")

	list := promptsOf(t, m, "everything")
	if len(list.Unavailable) > 0 {
		t.Fatalf("unavailable: %v", list.Unavailable)
	}
	var names []string
	for _, p := range list.Prompts {
		names = append(names, p.Name)
	}
	t.Logf("prompts: %s", strings.Join(names, ", "))
	i := slices.IndexFunc(list.Prompts, func(p protocol.MCPPrompt) bool { return p.Name == "args-prompt" })
	if i < 0 {
		t.Fatalf("no args-prompt among %v", names)
	}
	args := list.Prompts[i]
	if args.Server != "everything" || len(args.Arguments) != 2 || args.Arguments[0].Name != "city" || !args.Arguments[0].Required ||
		args.Arguments[1].Name != "state" || args.Arguments[1].Required {
		t.Errorf("args-prompt = %+v", args)
	}

	text, err := getPrompt(t, m, "everything", "args-prompt", map[string]string{"city": "Kyoto", "state": "Kansai"})
	if err != nil || text != "What's weather in Kyoto, Kansai?" {
		t.Errorf("args-prompt = %q, %v", text, err)
	}
	if text, err := getPrompt(t, m, "everything", "simple-prompt", nil); err != nil || text == "" {
		t.Errorf("simple-prompt = %q, %v", text, err)
	}
	if _, err := getPrompt(t, m, "everything", "args-prompt", nil); err == nil {
		t.Error("args-prompt without its city: no error")
	}
	if _, err := getPrompt(t, m, "everything", "no-such-prompt", nil); err == nil {
		t.Error("an unknown prompt: no error")
	}
	if _, err := getPrompt(t, m, "elsewhere", "args-prompt", nil); err == nil || !strings.Contains(err.Error(), `unknown MCP server "elsewhere"`) {
		t.Errorf("an unknown server: %v", err)
	}
	m.Close()
}

// What a server can make koe take of prompts is bounded: the count
// listed, the arguments sent and the text got.
func TestPromptLimits(t *testing.T) {
	cfg := everythingStdio(t)
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"everything": cfg}, MaxPrompts: 1, MaxPromptChars: 200}, defaultTiming)
	waitForTool(t, m, m.Toolbox([]string{"everything"}), "everything__echo")

	if list := promptsOf(t, m, "everything"); len(list.Prompts) != 1 {
		t.Errorf("mcp_max_prompts 1 listed %d", len(list.Prompts))
	}
	long := strings.Repeat("x", 201)
	if _, err := getPrompt(t, m, "everything", "args-prompt", map[string]string{"city": long}); err == nil ||
		!strings.Contains(err.Error(), "arguments are 205 characters long; mcp_max_prompt_chars is 200") {
		t.Errorf("long arguments: %v", err)
	}
	// Arguments within the bound make a text beyond it.
	if _, err := getPrompt(t, m, "everything", "args-prompt", map[string]string{"city": long[:190]}); err == nil ||
		!strings.Contains(err.Error(), `prompt "args-prompt" is 209 characters long; mcp_max_prompt_chars is 200`) {
		t.Errorf("a long prompt: %v", err)
	}
}

// A server that is not connected says so when asked for its prompts.
func TestPromptsNotConnected(t *testing.T) {
	g := newGate()
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"down": {Command: "/nonexistent/koe-mcp-server"}}}, g.timing(1, 1))
	release := g.next(t) // failed once, waiting to retry
	defer release()
	list := promptsOf(t, m, "down")
	if len(list.Prompts) != 0 || len(list.Unavailable) != 1 || !strings.Contains(list.Unavailable[0], "MCP server down is not connected (restarting)") {
		t.Errorf("prompts of a server that is down: %+v", list)
	}
	if _, err := getPrompt(t, m, "down", "p", nil); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("get from a server that is down: %v", err)
	}
}

func TestPromptConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxPrompts: -1}, "mcp_max_prompts -1 is negative"},
		{Config{MaxPromptChars: 10}, "mcp_max_prompt_chars 10 is out of range"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// BenchmarkEverythingGetPrompt measures getting args-prompt filled in
// from server-everything over stdio: what using a prompt, or a persona
// from one, adds before the turn.
func BenchmarkEverythingGetPrompt(b *testing.B) {
	m, _ := startManager(b, Config{Servers: map[string]ServerConfig{"everything": everythingStdio(b)}}, defaultTiming)
	waitForTool(b, m, m.Toolbox([]string{"everything"}), "everything__echo")
	args := map[string]string{"city": "Kyoto"}
	for b.Loop() {
		if _, err := getPrompt(b, m, "everything", "args-prompt", args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEverythingPrompts measures listing server-everything's prompts.
func BenchmarkEverythingPrompts(b *testing.B) {
	m, _ := startManager(b, Config{Servers: map[string]ServerConfig{"everything": everythingStdio(b)}}, defaultTiming)
	waitForTool(b, m, m.Toolbox([]string{"everything"}), "everything__echo")
	for b.Loop() {
		if list := promptsOf(b, m, "everything"); len(list.Prompts) == 0 {
			b.Fatal(list)
		}
	}
}
