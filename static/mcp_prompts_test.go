package static_test

import (
	"slices"
	"testing"

	"koe/mcp"
	"koe/protocol"
	"koe/testkit/cdp"
	"koe/testkit/everythingtest"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// koe's page lists the prompts of the character's MCP servers, fills one
// in and sends it: koe runs the prompt's text as the user's turn, and the
// page shows it as the user's bubble, then the answer.
func TestChatPageMCPPrompt(t *testing.T) {
	command, args := everythingtest.Stdio(t)
	server := mcp.ServerConfig{Command: command, Args: args}
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700,
		AutoplayPolicy: "no-user-gesture-required", MuteAudio: true})
	llm := koetest.StartLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm)
	cfg.MCP.Servers = map[string]mcp.ServerConfig{"everything": server}
	cfg.Character.Tools.MCPServers = []string{"everything"}
	koe := koetest.StartKoe(t, cfg)
	// The page asks when its panel opens; the server connects in the
	// background.
	everythingtest.AwaitPrompt(t, "http://"+koe.Addr(), cfg.Character.ConfUID, "args-prompt")

	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	// The documents' count, once in, widens the header: the panel's
	// button moves then.
	p.waitFor(`document.getElementById("doc-summary").textContent !== ""`)
	p.click("#prompts summary")
	p.waitFor(`document.querySelector('#prompt-list button[data-name="args-prompt"]') !== null`)
	p.click(`#prompt-list button[data-name="args-prompt"]`)
	if !p.evalBool(`[...document.querySelectorAll("#prompt-args input")].map((i) => i.name + (i.required ? "*" : "")).join(" ") === "city* state"`) {
		t.Fatal("the form does not ask for city (required) and state")
	}
	p.click(`#prompt-args input[name="city"]`)
	ctx, cancel := p.ctx()
	if err := p.p.Type(ctx, "Kyoto"); err != nil {
		t.Fatal(err)
	}
	cancel()
	m := p.mark()
	p.click("#prompt-send")
	turn := p.waitTurn(m)
	const want = "What's weather in Kyoto?"
	p.expectBubbles(bubble{Kind: "human", Text: want}, bubble{Kind: "ai", Text: "You said: " + want + "."})
	var sent []string
	for _, f := range turn.Out {
		sent = append(sent, f.Type)
	}
	if !slices.Contains(sent, protocol.TypeUseMCPPrompt) || slices.Contains(sent, protocol.TypeTextInput) {
		t.Errorf("the page sent %q", sent)
	}
	if p.evalBool(`document.getElementById("prompts").open`) {
		t.Error("the panel stays open after sending")
	}
}
