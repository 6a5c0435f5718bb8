package static_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"koe/mcp"
	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// askPageLLM deletes the note the user names, and answers once it has the
// result.
func askPageLLM(r fakellm.Request) fakellm.Reply {
	if r.Messages[len(r.Messages)-1].Role == "tool" {
		return fakellm.Reply{Tokens: fakellm.Words("All right.")}
	}
	name := "ideas"
	if strings.Contains(lastUser(r), "groceries") {
		name = "groceries"
	}
	return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: "notes__delete_note", Arguments: `{"name":"` + name + `"}`}}}
}

// A tool that changes things waits for the user's yes: koe's page shows
// the question under the reply with Yes and No; a click answers it, and a
// typed "no" answers it without stopping the reply.
func TestChatPageAsksBeforeATool(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700,
		AutoplayPolicy: "no-user-gesture-required", MuteAudio: true})
	bin := filepath.Join(t.TempDir(), "askserver")
	build := exec.Command("go", "build", "-o", bin, "../mcp/testdata/askserver")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("building the MCP test server: %v", err)
	}
	llm := koetest.StartLLM(t, askPageLLM)
	cfg := testConfig(t, t.TempDir(), llm)
	cfg.MCP.Servers = map[string]mcp.ServerConfig{"notes": {Command: bin}}
	cfg.Character.Tools.MCPServers = []string{"notes"}
	koe, logs := koetest.StartKoeLogged(t, cfg)
	logs.WaitFor("MCP server connected", 1)

	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)

	m := p.mark()
	p.say("Delete my ideas note.")
	p.waitFor(`!!document.querySelector("#log .ask .ask-yes")`)
	var got string
	p.eval(`document.querySelector("#log .ask .ask-text").textContent`, &got)
	if got != `May I run notes__delete_note with {"name":"ideas"}? Yes or no?` {
		t.Fatalf("the question reads %q", got)
	}
	p.screenshot("ask-confirm.png")
	p.click("#log .ask .ask-yes")
	turn := p.waitTurn(m)
	if n := len(turn.sent("interrupt-signal")); n != 0 {
		t.Fatalf("answering sent %d interrupts", n)
	}
	if !p.evalBool(`document.querySelector("#log .ask").dataset.action === "accept" && !document.querySelector("#log .ask button")`) {
		t.Fatal("the question still offers its buttons after the answer")
	}
	tool := p.parts(-1)[0]
	if tool.Kind != "tool" || tool.State != "done" || tool.Output != "deleted ideas; left: groceries" {
		t.Fatalf("the tool entry: %+v", tool)
	}

	m = p.mark()
	p.say("Delete groceries too.")
	p.waitFor(`document.querySelectorAll("#log .ask .ask-no").length === 1`)
	p.say("no")
	turn = p.waitTurn(m)
	if n := len(turn.sent("interrupt-signal")); n != 0 {
		t.Fatalf("a typed answer sent %d interrupts", n)
	}
	if !p.evalBool(`[...document.querySelectorAll("#log .ask")].at(-1).dataset.action === "decline"`) {
		t.Fatal("the typed no did not decline")
	}
	if tool := p.parts(-1)[0]; tool.State != "error" || !strings.Contains(tool.Output, "the user said no") {
		t.Fatalf("the tool entry: %+v", tool)
	}
}
