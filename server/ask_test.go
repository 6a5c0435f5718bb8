package server_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/app"
	"koe/config"
	"koe/mcp"
	"koe/protocol"
	"koe/testkit/everythingtest"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// Questions the character puts to its user while tools run: a yes before
// a tool that changes things, and an MCP server's question
// (elicitation). Real WebSocket sessions, the fake LLM over HTTP, MCP
// servers over stdio: the tests' own (mcp/testdata/askserver) and the
// reference server from npm.

// askServer builds mcp/testdata/askserver once per test.
func askServer(t *testing.T) mcp.ServerConfig {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "askserver")
	build := exec.Command("go", "build", "-o", bin, "../mcp/testdata/askserver")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("building the MCP test server: %v", err)
	}
	return mcp.ServerConfig{Command: bin}
}

// askEverything is the reference server over stdio; without node or the
// package the test is skipped (fails on CI).
func askEverything(t *testing.T) mcp.ServerConfig {
	t.Helper()
	command, args := everythingtest.Stdio(t)
	return mcp.ServerConfig{Command: command, Args: args}
}

// startAskKoe starts koe with one MCP server, server, enabled for the
// character, speaking through the fake LLM, and returns once the server
// is connected.
func startAskKoe(t *testing.T, llm *fakellm.Server, server mcp.ServerConfig, change func(*config.Config)) *app.Main {
	t.Helper()
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.MCP.Servers = map[string]mcp.ServerConfig{"srv": server}
	cfg.Character.Tools.MCPServers = []string{"srv"}
	if change != nil {
		change(&cfg)
	}
	m, logs := koetest.StartKoeLogged(t, cfg)
	logs.WaitFor("MCP server connected", 1)
	return m
}

// call is a fake model reply that calls one tool.
func call(name, args string) fakellm.Reply {
	return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: name, Arguments: args}}}
}

// toolResult is what the model was told of the turn's call: the last
// tool result of its last request that offered tools (not a summary's,
// nor the reading of an answer).
func toolResult(t *testing.T, llm *fakellm.Server) string {
	t.Helper()
	var last fakellm.Request
	for _, r := range llm.Requests() {
		if len(r.Tools) > 0 {
			last = r
		}
	}
	for i := len(last.Messages) - 1; i >= 0; i-- {
		if m := last.Messages[i]; m.Role == "tool" {
			return m.Content
		}
	}
	t.Fatalf("the model's last request carries no tool result: %v", last.Messages)
	return ""
}

// askOf waits for the question and returns its frame, and the frames
// before it.
func askOf(c *client) (msg, []msg) {
	c.t.Helper()
	got := c.until(isType("ask"))
	return got[len(got)-1], got
}

// finish plays the client's part to the turn's end and returns the
// frames.
func finish(c *client) []msg {
	c.t.Helper()
	return c.until(func(m msg) bool {
		if m.typ() == "backend-synth-complete" {
			c.send(msg{"type": "frontend-playback-complete"})
		}
		return isControl("conversation-chain-end")(m)
	})
}

// askingModel calls the tool for every user message and answers once it
// has the result; it summarises with a sentence and reads answers into
// reading (JSON).
func askingModel(tool fakellm.Reply, reading string) func(fakellm.Request) fakellm.Reply {
	return func(r fakellm.Request) fakellm.Reply {
		first, last := r.Messages[0].Content, r.Messages[len(r.Messages)-1]
		switch {
		case strings.HasPrefix(first, "Summarise"):
			return fakellm.Reply{Tokens: fakellm.Words("They talked.")}
		case strings.HasPrefix(first, "Read a person's spoken answer"):
			return fakellm.Reply{Tokens: []string{reading}}
		case last.Role == "tool":
			return fakellm.Reply{Tokens: fakellm.Words("Done.")}
		}
		return tool
	}
}

func textInput(text string) msg {
	return msg{"type": "text-input", "text": text, "images": []any{}}
}

// A tool annotated as destructive runs only after the user's yes, said
// aloud and shown; "no" keeps it from running, and the model hears so.
func TestDestructiveToolWaitsForYes(t *testing.T) {
	llm := startLLM(t, fakellm.Script(
		call("srv__delete_note", `{"name":"groceries"}`), fakellm.Reply{Tokens: fakellm.Words("Kept it.")},
		call("srv__delete_note", `{"name":"groceries"}`), fakellm.Reply{Tokens: fakellm.Words("Deleted.")},
	))
	m := startAskKoe(t, llm, askServer(t), nil)
	c := dialKoe(t, m.Addr())

	c.send(textInput("Delete my groceries note."))
	ask, before := askOf(c)
	if ask.str("kind") != "confirm" || ask.str("tool_name") != "srv__delete_note" || !strings.Contains(ask.str("text"), `{"name":"groceries"}`) {
		t.Fatalf("the question: %v", ask)
	}
	for _, f := range before {
		if f.typ() == "status" {
			if st, _ := f["content"].(map[string]any); st["task_id"] == "tool:call_1" && st["state"] == "end" {
				t.Fatal("the tool ended before the user answered")
			}
		}
	}
	spoken := c.until(func(f msg) bool {
		dt, _ := f["display_text"].(map[string]any)
		return f.typ() == "audio" && strings.Contains(dt["text"].(string), "May I run srv__delete_note")
	})
	if a := spoken[len(spoken)-1]; a["audio"] == nil {
		t.Fatal("the question was not spoken")
	}
	c.send(textInput("No, keep it."))
	end := c.until(isType("ask-end"))
	if e := end[len(end)-1]; e.str("action") != "decline" || e.str("ask_id") != ask.str("ask_id") {
		t.Fatalf("the question ended as %v", e)
	}
	finish(c)
	if got := toolResult(t, llm); !strings.HasPrefix(got, "Error: the user did not allow this tool call: the user said no") {
		t.Fatalf("the model was told %q", got)
	}
	if n := len(llm.Requests()); n != 2 {
		t.Fatalf("%d LLM requests: the answer must not start a turn of its own", n)
	}

	c.send(textInput("Delete it after all."))
	askOf(c)
	c.send(textInput("Yes, go ahead."))
	end = c.until(isType("ask-end"))
	if e := end[len(end)-1]; e.str("action") != "accept" {
		t.Fatalf("the question ended as %v", e)
	}
	finish(c)
	if got := toolResult(t, llm); got != "deleted groceries; left: ideas" {
		t.Fatalf("the model was told %q", got)
	}
}

// The stock OLV client sees the question in the call's tool_call_status
// (running, then error when refused: statuses it knows) and hears it; a
// typed answer answers it.
func TestConfirmationInTheOLVClient(t *testing.T) {
	llm := startLLM(t, fakellm.Script(call("srv__delete_note", `{"name":"ideas"}`), fakellm.Reply{Tokens: fakellm.Words("Fine.")}))
	m := startAskKoe(t, llm, askServer(t), nil)
	c := dialGreeted(t, m.Addr())
	c.send(textInput("Delete ideas."))
	c.until(func(f msg) bool {
		return f.typ() == "tool_call_status" && f.str("status") == "running" && strings.HasPrefix(f.str("content"), "Waiting for your answer: May I run srv__delete_note")
	})
	c.send(textInput("never mind"))
	frames := finish(c)
	var statuses []string
	for _, f := range frames {
		switch f.typ() {
		case "tool_call_status":
			statuses = append(statuses, f.str("status"))
		case "ask", "ask-end", "status", "token":
			t.Fatalf("an OLV client got koe's %s event", f.typ())
		}
	}
	if len(statuses) != 1 || statuses[0] != "error" {
		t.Fatalf("the call's statuses after the answer: %q", statuses)
	}
}

// A click on koe's page answers by the question's id; a wrong id is an
// error, and nothing else answers.
func TestConfirmationByClick(t *testing.T) {
	llm := startLLM(t, fakellm.Script(call("srv__delete_note", `{"name":"ideas"}`), fakellm.Reply{Tokens: fakellm.Words("Done.")}))
	m := startAskKoe(t, llm, askServer(t), nil)
	c := dialKoe(t, m.Addr())
	c.send(textInput("Delete ideas."))
	ask, _ := askOf(c)
	c.expectError(msg{"type": "ask-answer", "ask_id": "ask_forged", "action": "accept"}, "no question")
	c.send(msg{"type": "ask-answer", "ask_id": ask.str("ask_id"), "action": "accept"})
	finish(c)
	if got := toolResult(t, llm); got != "deleted ideas; left: groceries" {
		t.Fatalf("the model was told %q", got)
	}
}

// Unanswered, the question is declined after tools.ask_timeout; an
// interrupt cancels it and stops the turn.
func TestConfirmationTimesOutAndInterruptCancels(t *testing.T) {
	llm := startLLM(t, fakellm.Script(call("srv__delete_note", `{"name":"ideas"}`), fakellm.Reply{Tokens: fakellm.Words("Nobody answered.")},
		call("srv__delete_note", `{"name":"ideas"}`)))
	m := startAskKoe(t, llm, askServer(t), func(cfg *config.Config) { cfg.Character.Tools.AskTimeout = time.Millisecond })
	c := dialKoe(t, m.Addr())
	c.send(textInput("Delete ideas."))
	end := c.until(isType("ask-end"))
	if e := end[len(end)-1]; e.str("action") != "decline" || !strings.Contains(e.str("reason"), "tools.ask_timeout") {
		t.Fatalf("the question ended as %v", e)
	}
	finish(c)
	if got := toolResult(t, llm); !strings.Contains(got, "no answer within 1ms (tools.ask_timeout)") {
		t.Fatalf("the model was told %q", got)
	}

	m2 := startAskKoe(t, llm, askServer(t), nil)
	c2 := dialKoe(t, m2.Addr())
	c2.send(textInput("Delete ideas."))
	askOf(c2)
	c2.send(msg{"type": "interrupt-signal", "text": ""})
	end = c2.until(isType("ask-end"))
	if e := end[len(end)-1]; e.str("action") != "cancel" {
		t.Fatalf("the question ended as %v", e)
	}
	// The call is closed as an interrupted tool's is (its result is
	// koe's last event of it); nothing more of the turn follows.
	c2.until(func(f msg) bool {
		m, _ := f["content"].(map[string]any)
		return f.typ() == "message" && m["type"] == "tool" && m["status"] == "error"
	})
	c2.silent()
	if n := len(llm.Requests()); n != 3 {
		t.Fatalf("%d LLM requests: the interrupted turn went on", n)
	}
}

// A chat API turn has nobody to answer: the tool is refused at once and
// the model hears why. Allowed tools run unasked; denied ones are not
// offered, and not run when named anyway.
func TestToolPolicyAllowDenyAndTheChatAPI(t *testing.T) {
	llm := startLLM(t, fakellm.Script(call("srv__delete_note", `{"name":"ideas"}`), fakellm.Reply{Tokens: fakellm.Words("Could not.")}))
	m := startAskKoe(t, llm, askServer(t), nil)
	resp := postJSON(t, "http://"+m.Addr()+"/api/chat/invoke", protocol.ChatRequest{Message: "Delete ideas."})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := toolResult(t, llm); !strings.Contains(got, "nobody can be asked here") {
		t.Fatalf("the model was told %q (answer: %s)", got, body)
	}

	llm2 := startLLM(t, fakellm.Script(call("srv__delete_note", `{"name":"ideas"}`), fakellm.Reply{Tokens: fakellm.Words("Done.")},
		call("srv__list_notes", `{}`), fakellm.Reply{Tokens: fakellm.Words("No.")}))
	m2 := startAskKoe(t, llm2, askServer(t), func(cfg *config.Config) {
		cfg.Character.Tools.Allow = []string{"srv__delete_*"}
		cfg.Character.Tools.Deny = []string{"srv__list_notes"}
	})
	c := dialKoe(t, m2.Addr())
	for _, f := range c.turn("Delete ideas.") {
		if f.typ() == "ask" {
			t.Fatal("an allowed tool asked")
		}
	}
	if got := toolResult(t, llm2); got != "deleted ideas; left: groceries" {
		t.Fatalf("the model was told %q", got)
	}
	for _, name := range llm2.Requests()[0].Tools {
		if name == "srv__list_notes" {
			t.Fatal("a denied tool was offered")
		}
	}
	c.turn("List them.")
	if got := toolResult(t, llm2); !strings.Contains(got, "not allowed for this character (tools.deny)") {
		t.Fatalf("the model was told %q", got)
	}
}

// A server's question is asked aloud; the answer is read against its
// schema: an option named in a sentence, a click's option, "never
// mind" declines and "cancel" cancels.
func TestElicitationByVoice(t *testing.T) {
	llm := startLLM(t, askingModel(call("srv__pick_color", `{}`), ""))
	m := startAskKoe(t, llm, askServer(t), nil)
	c := dialKoe(t, m.Addr())
	c.send(textInput("Paint my notes."))
	ask, _ := askOf(c)
	if ask.str("kind") != "elicit" || !strings.HasPrefix(ask.str("text"), "Which color should the notes be?") || ask.str("source") != "MCP server srv" {
		t.Fatalf("the question: %v", ask)
	}
	if opts, _ := ask["options"].([]any); len(opts) != 3 {
		t.Fatalf("the options: %v", ask["options"])
	}
	c.send(textInput("Blue, please."))
	finish(c)
	if got := toolResult(t, llm); got != "painted the notes blue" {
		t.Fatalf("the server got %q", got)
	}

	c.send(textInput("Again."))
	ask, _ = askOf(c)
	c.send(msg{"type": "ask-answer", "ask_id": ask.str("ask_id"), "action": "accept", "text": "green"})
	finish(c)
	if got := toolResult(t, llm); got != "painted the notes green" {
		t.Fatalf("the server got %q", got)
	}

	for answer, want := range map[string]string{"Never mind.": "decline", "Cancel that.": "cancel"} {
		c.send(textInput("Again."))
		askOf(c)
		c.send(textInput(answer))
		finish(c)
		if got := toolResult(t, llm); got != "the user answered "+want {
			t.Fatalf("%q: the server got %q", answer, got)
		}
	}
}

// The reference server: its elicitation tool is annotated as not
// read-only, so koe asks first; then its form of many fields is read by
// rules ("name: …, integer is …") or, when the words name no fields, by
// one structured LLM call.
func TestElicitationWithServerEverything(t *testing.T) {
	llm := startLLM(t, askingModel(call("srv__trigger-elicitation-request", `{}`), `{"name":"Grace Hopper","check":true}`))
	m := startAskKoe(t, llm, askEverything(t), nil)
	c := dialKoe(t, m.Addr())
	c.send(textInput("Fill in the form."))
	if ask, _ := askOf(c); ask.str("kind") != "confirm" {
		t.Fatalf("first question: %v", ask)
	}
	c.send(textInput("yes"))
	ask, _ := askOf(c)
	if ask.str("kind") != "elicit" || !strings.Contains(ask.str("text"), "Please provide inputs") {
		t.Fatalf("second question: %v", ask)
	}
	c.send(textInput("name: Ada Lovelace, integer is 7"))
	finish(c)
	got := toolResult(t, llm)
	if !strings.Contains(got, "- Name: Ada Lovelace") || !strings.Contains(got, "- Favorite Integer: 7") {
		t.Fatalf("the server got %q", got)
	}

	c.send(textInput("Once more."))
	askOf(c)
	c.send(textInput("yes"))
	askOf(c)
	c.send(textInput("I'm Grace Hopper and I agree to the terms"))
	finish(c)
	got = toolResult(t, llm)
	if !strings.Contains(got, "- Name: Grace Hopper") || !strings.Contains(got, "- Agreed to terms: true") {
		t.Fatalf("the server got %q", got)
	}
	reads := 0
	for _, r := range llm.Requests() {
		if strings.HasPrefix(r.Messages[0].Content, "Read a person's spoken answer") {
			reads++
			if r.Stream || !strings.Contains(contentOf(r), "Grace Hopper") {
				t.Fatalf("the answer was read by %+v", r)
			}
		}
	}
	if reads != 1 {
		t.Fatalf("%d LLM calls read answers; want the one the rules could not read", reads)
	}
}

// Spoken, the answer is transcribed and answers the question instead of
// starting a turn (the stock OLV client's mic-audio-end); watchers of
// the session hear and see the question too.
func TestConfirmationBySpeechSeenByWatchers(t *testing.T) {
	llm := startLLM(t, askingModel(call("srv__delete_note", `{"name":"ideas"}`), ""))
	llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		return fakellm.TranscriptionReply{Text: "Yes, please."}
	})
	m := startAskKoe(t, llm, askServer(t), func(cfg *config.Config) { *cfg = withFakeASR(*cfg, llm) })
	olvWatcher := dialWatcher(t, m.Addr(), "watch=desk", false)
	koeWatcher := dialWatcher(t, m.Addr(), "watch=desk", true)
	olvWatcher.alive()
	koeWatcher.alive()
	c := dialURL(t, websocket.DefaultDialer, "ws://"+m.Addr()+"/client-ws?client_uid=desk", nil)
	for range 5 {
		c.next()
	}
	question := func(f msg) bool {
		dt, _ := f["display_text"].(map[string]any)
		return f.typ() == "audio" && dt != nil && strings.Contains(dt["text"].(string), "May I run srv__delete_note")
	}
	c.send(textInput("Delete ideas."))
	c.until(question) // the user answers once they heard it
	c.sendMic(tone(time.Second, 0.3))
	heard := ""
	for _, f := range finish(c) {
		if f.typ() == "user-input-transcription" {
			heard = f.str("text")
		}
	}
	if heard != "Yes, please." {
		t.Fatalf("the answer was transcribed as %q", heard)
	}
	if r := toolResult(t, llm); r != "deleted ideas; left: groceries" {
		t.Fatalf("the model was told %q", r)
	}
	if n := len(llm.TranscriptionRequests()); n != 1 {
		t.Fatalf("%d transcriptions", n)
	}

	olvWatcher.until(question)
	var kinds []string
	for _, f := range koeWatcher.until(isType("ask-end")) {
		switch {
		case f.typ() == "ask":
			kinds = append(kinds, "ask "+f.str("kind"))
		case question(f):
			kinds = append(kinds, "spoken")
		case f.typ() == "ask-end":
			kinds = append(kinds, "ask-end "+f.str("action"))
		}
	}
	if strings.Join(kinds, ", ") != "ask confirm, spoken, ask-end accept" {
		t.Fatalf("the koe watcher saw %q", kinds)
	}
}
