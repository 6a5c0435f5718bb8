package chatcli

import (
	"strings"
	"testing"

	"koe/config"
	"koe/mcp"
	"koe/testkit/everythingtest"
	"koe/testkit/fakellm"
)

// /prompts lists server-everything's prompts through the chat API, and
// /prompt sends one, filled in, as the user's turn: the transcript shows
// the prompt's text, and koe's model got it.
func TestChatSendsAnMCPPrompt(t *testing.T) {
	command, args := everythingtest.Stdio(t)
	server := mcp.ServerConfig{Command: command, Args: args}
	base, llm := startKoe(t, fakellm.Echo(0), func(cfg *config.Config) {
		cfg.MCP.Servers = map[string]mcp.ServerConfig{"everything": server}
		cfg.Character.Tools.MCPServers = []string{"everything"}
	})
	conf := "koe_default"
	everythingtest.AwaitPrompt(t, base, conf, "args-prompt")
	rec := &recorder{}
	s := startChat(t, startRecorder(t, base, rec), Settings{Character: conf}, false)
	s.waitFor(userPrompt)
	s.send("/prompts")
	got := s.waitFor("sends one (quote a value with spaces: city=\"New York\").\n" + userPrompt)
	if !strings.Contains(got, "everything/args-prompt city* state  — Arguments Prompt\n") {
		t.Errorf("/prompts:\n%s", got)
	}
	s.send("/prompt everything/args-prompt state=NY")
	s.send(`/prompt everything/args-prompt city="New York" state=NY`)
	got = s.waitFor("koe> You said: What's weather in New York, NY?.\n" + userPrompt)
	if !strings.Contains(got, "error: ") || !strings.Contains(got, "you> What's weather in New York, NY?\n") {
		t.Errorf("/prompt:\n%s", got)
	}
	if ref := rec.lastChat(t).MCPPrompt; ref == nil || ref.Server != "everything" || ref.Prompt != "args-prompt" || ref.Arguments["city"] != "New York" {
		t.Errorf("the chat request's mcp_prompt: %+v", ref)
	}
	reqs := llm.Requests()
	msgs := reqs[len(reqs)-1].Messages
	if last := msgs[len(msgs)-1]; !strings.HasSuffix(last.Content, "What's weather in New York, NY?") {
		t.Errorf("the model got %q", last.Content)
	}
}

func TestPromptArguments(t *testing.T) {
	got, err := promptArguments(` city="New York"  state=NY note="a \"quoted\" word"`)
	if err != nil || len(got) != 3 || got["city"] != "New York" || got["state"] != "NY" || got["note"] != `a "quoted" word` {
		t.Errorf("%q, %v", got, err)
	}
	for _, bad := range []string{"city", `city="open`, "=x"} {
		if _, err := promptArguments(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
