package static_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// evil is server text that would run script if the page took it as HTML.
const evil = `<img src=x onerror=window.koeAlerted=1>`

// The tool turns of the fake LLM, keyed by what the user types.
const (
	sixTimesSeven = "What is six times seven?"
	divideByZero  = "Divide one by zero and add two and two."
)

// toolLLM calls the calculator for the tool prompts and answers from the
// results once they are in.
func toolLLM(r fakellm.Request) fakellm.Reply {
	switch user, results := lastUser(r), toolResults(r); {
	case user == sixTimesSeven && results == 0:
		return fakellm.Reply{Tokens: fakellm.Words("Let me check."), ToolCalls: []fakellm.ToolCall{
			{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6 * 7"}`},
		}}
	case user == sixTimesSeven:
		return fakellm.Reply{Tokens: fakellm.Words("Six times seven is 42."), Interval: 10 * time.Millisecond}
	case user == divideByZero && results == 0:
		// Two calls at once, before saying anything; one fails.
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{
			{ID: "call_1", Name: "calculator", Arguments: `{"expression":"1 / 0"}`},
			{ID: "call_2", Name: "calculator", Arguments: `{"expression":"2 + 2"}`},
		}}
	case user == divideByZero && results == 2:
		// Then a tool that does not exist, named in HTML.
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "call_3", Name: evil, Arguments: `{}`}}}
	case user == divideByZero:
		return fakellm.Reply{Tokens: fakellm.Words("One by zero has no answer. Two and two make 4.")}
	}
	return fakellm.Echo(10 * time.Millisecond)(r)
}

// toolResults counts the tool messages of the request's current turn.
func toolResults(r fakellm.Request) int {
	n := 0
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role != "user"; i-- {
		if r.Messages[i].Role == "tool" {
			n++
		}
	}
	return n
}

// part is one thing an AI bubble shows, in order: a run of the reply's
// text, or a tool call's entry.
type part struct {
	Kind        string // "text" or "tool"
	Text        string // of a text run
	ID, Name    string // of a tool entry
	State       string // data-state: running, done, error, stopped
	Badge       string // the state as shown
	Input       string // "" while hidden
	OutputLabel string // "Output" or "Error"; "" while hidden
	Output      string
}

func textPart(s string) part { return part{Kind: "text", Text: s} }

// partsJS evaluates to the parts of the AI bubble at index %d (negative:
// from the end).
const partsJS = `((b) => [...b.childNodes].flatMap((n) => {
	if (n.nodeType === Node.TEXT_NODE) return n.data ? [{Kind: "text", Text: n.data}] : [];
	if (!n.matches("details.tool")) return [];
	const [input, output] = n.querySelectorAll(".tool-part");
	return [{Kind: "tool", ID: n.dataset.toolId, Name: n.querySelector(".tool-name").textContent,
		State: n.dataset.state, Badge: n.querySelector(".badge").textContent,
		Input: input.hidden ? "" : input.querySelector("pre").textContent,
		OutputLabel: output.hidden ? "" : output.querySelector(".tool-label").textContent,
		Output: output.hidden ? "" : output.querySelector("pre").textContent}];
}))([...document.querySelectorAll("#log .msg.ai")].at(%d))`

func (p *pageT) parts(i int) []part {
	p.t.Helper()
	var out []part
	p.eval(fmt.Sprintf(partsJS, i), &out)
	return out
}

func (p *pageT) expectParts(i int, want ...part) {
	p.t.Helper()
	if got := p.parts(i); !slices.Equal(got, want) {
		p.fail(fmt.Errorf("AI bubble %d shows\n%+v\nwant\n%+v", i, got, want))
	}
}

// stepJS evaluates to the status line: its class and text, "" if none.
const stepJS = `(() => { const s = document.querySelectorAll("#log .step");
	return s.length === 1 ? s[0].className + "|" + s[0].textContent : s.length > 1 ? "several" : "" })()`

// toolWatchJS records what the latest AI bubble's tool entries and the
// status line looked like after every change (koeToolLog), and marks an
// entry element that was seen running, so that a test can tell that the
// entry that ended is the one that ran.
const toolWatchJS = `window.koeToolLog = [];
	new MutationObserver(() => {
		const b = [...document.querySelectorAll("#log .msg.ai")].at(-1);
		const tools = b ? [...b.querySelectorAll("details.tool")].map((d) => {
			if (d.dataset.state === "running") d.koeSeenRunning = true;
			return d.dataset.toolId + " " + d.dataset.state;
		}) : [];
		const s = {Tools: tools, Step: ` + stepJS + `};
		const last = koeToolLog.at(-1);
		if (!last || JSON.stringify(last) !== JSON.stringify(s)) koeToolLog.push(s);
	}).observe(document.getElementById("log"), {subtree: true, childList: true, characterData: true, attributes: true})`

type toolSnap struct {
	Tools []string
	Step  string
}

func (p *pageT) toolLog() []toolSnap {
	p.t.Helper()
	var out []toolSnap
	p.eval(`koeToolLog.splice(0)`, &out)
	return out
}

// seen reports whether some snapshot has every tool state in tools and the
// status line step.
func seen(log []toolSnap, step string, tools ...string) bool {
	return slices.ContainsFunc(log, func(s toolSnap) bool {
		for _, t := range tools {
			if !slices.Contains(s.Tools, t) {
				return false
			}
		}
		return s.Step == step
	})
}

// TestChatPageTools: a real koe whose model calls the calculator. The
// page shows each call inside the reply's bubble where it was made, first
// running, then done or failed, and the status line while it runs; after
// the turn the line is gone. Reloaded from the history, the conversation
// shows the messages only.
func TestChatPageTools(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700,
		AutoplayPolicy: "no-user-gesture-required", MuteAudio: true})
	llm := koetest.StartLLM(t, toolLLM)
	cfg := testConfig(t, t.TempDir(), llm)
	cfg.Character.Tools.Enabled = []string{"calculator"}
	koe := koetest.StartKoe(t, cfg)
	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.eval(`window.alert = () => { window.koeAlerted = 1 }; `+toolWatchJS, nil)

	// What the model said before the call, the call, then the answer.
	m := p.mark()
	p.say(sixTimesSeven)
	p.waitTurn(m)
	calc := part{Kind: "tool", ID: "call_1", Name: "calculator", State: "done", Badge: "done",
		Input: "{\n  \"expression\": \"6 * 7\"\n}", OutputLabel: "Output", Output: "42"}
	// The next cycle's tokens start with the space that separates it in
	// the stored reply.
	p.expectParts(-1, textPart("Let me check."), calc, textPart(" Six times seven is 42."))
	// The status line follows the tool as it runs; the entry follows the
	// speech, and shows the call running once the words said before it
	// have been spoken (koe's events and OLV's frames keep two clocks).
	log := p.toolLog()
	if !seen(log, "step running|Running calculator") {
		t.Fatalf("the status line never showed the call running: %+v", log)
	}
	if !slices.ContainsFunc(log, func(s toolSnap) bool { return slices.Contains(s.Tools, "call_1 running") }) {
		t.Fatalf("the call was never shown running: %+v", log)
	}
	if last := log[len(log)-1]; last.Step != "" || !slices.Equal(last.Tools, []string{"call_1 done"}) {
		t.Fatalf("after the turn: %+v, want the call done and no status line", last)
	}
	if !p.evalBool(`document.querySelectorAll("#log details.tool").length === 1 && document.querySelector("#log details.tool").koeSeenRunning === true`) {
		t.Fatal("the entry that ended is not the one that was shown running")
	}
	p.screenshot("tool-closed.png")

	// Keyboard: the entry is the next stop after New; Enter opens it.
	p.eval(`document.getElementById("new").focus()`, nil)
	p.press("Tab")
	if !p.evalBool(`document.activeElement === document.querySelector("#log details.tool summary")`) {
		t.Fatal("Tab from New does not reach the tool entry")
	}
	if p.evalBool(`document.querySelector("#log details.tool").open`) {
		t.Fatal("the entry starts open")
	}
	p.press("Enter")
	p.waitFor(`document.querySelector("#log details.tool").open &&
		[...document.querySelectorAll("#log details.tool pre")].every((e) => e.offsetHeight > 0)`)
	p.screenshot("tool-open.png")

	// Calls made before saying anything, one failing, then one of a tool
	// that does not exist (named in HTML); ids repeat those of the last
	// turn, whose entry stays as it was.
	m = p.mark()
	p.say(divideByZero)
	p.waitTurn(m)
	p.expectParts(0, textPart("Let me check."), calc, textPart(" Six times seven is 42."))
	got := p.parts(-1)
	if len(got) != 4 || got[3] != textPart("One by zero has no answer. Two and two make 4.") {
		p.fail(fmt.Errorf("the second reply shows %+v", got))
	}
	div, add, unknown := got[0], got[1], got[2]
	if div.ID != "call_1" || div.State != "error" || div.Badge != "error" || div.Input != "{\n  \"expression\": \"1 / 0\"\n}" ||
		div.OutputLabel != "Error" || !strings.Contains(div.Output, "division by zero") || strings.HasPrefix(div.Output, "Error:") {
		t.Fatalf("failed call shows %+v", div)
	}
	if want := (part{Kind: "tool", ID: "call_2", Name: "calculator", State: "done", Badge: "done",
		Input: "{\n  \"expression\": \"2 + 2\"\n}", OutputLabel: "Output", Output: "4"}); add != want {
		t.Fatalf("second call shows %+v, want %+v", add, want)
	}
	if unknown.ID != "call_3" || unknown.Name != evil || unknown.State != "error" || !strings.Contains(unknown.Output, evil) {
		t.Fatalf("the unknown tool's call shows %+v", unknown)
	}
	log = p.toolLog()
	if !seen(log, "step error|calculator failed: "+div.Output, "call_1 error", "call_2 done") ||
		!seen(log, "step error|"+evil+" failed: "+unknown.Output, "call_3 error") {
		t.Fatalf("the failure was not shown in the status line: %+v", log)
	}
	if last := log[len(log)-1]; last.Step != "" {
		t.Fatalf("after the turn the status line still shows %q", last.Step)
	}
	if p.evalBool(`document.querySelectorAll("#log img").length > 0 || window.koeAlerted === 1`) {
		t.Fatal("server text was taken as HTML")
	}

	// The history keeps the messages; tool calls are shown live only.
	p.waitFor(`histories.options.length === 2`)
	m = p.mark()
	p.eval(`histories.value = histories.options[1].value; histories.dispatchEvent(new Event("change"))`, nil)
	p.waitFor(`koeWire.in.slice(` + fmt.Sprint(m.in) + `).some((f) => f.Type === "history-data")`)
	p.expectBubbles(bubble{"human", sixTimesSeven, false}, bubble{"ai", "Let me check. Six times seven is 42.", false},
		bubble{"human", divideByZero, false}, bubble{"ai", "One by zero has no answer. Two and two make 4.", false})
	if n := p.evalInt(`document.querySelectorAll("#log details.tool, #log .step").length`); n != 0 {
		t.Fatalf("the history shows %d tool entries or status lines", n)
	}
}

// TestChatPageToolFrames hands the page a tool turn's frames in orders a
// real koe can produce, and server text that is HTML.
func TestChatPageToolFrames(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700, MuteAudio: true})
	llm := koetest.StartLLM(t, fakellm.Echo(10*time.Millisecond))
	koe := koetest.StartKoe(t, testConfig(t, t.TempDir(), llm))
	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.eval(`window.alert = () => { window.koeAlerted = 1 };
		window.koeSend = (...frames) => frames.forEach((f) => koeWire.deliver(JSON.stringify(f)));
		window.koeTool = (id, name, status, content) => ({type: "tool_call_status", tool_id: id, tool_name: name,
			status, content, timestamp: new Date().toISOString(), name: "Koe"});
		window.koeStep = (id, state, content, details) => ({type: "status", content: {task_id: id, state, content, error_details: details}});
		window.koePiece = (text) => ({type: "audio", audio: null, volumes: [], slice_length: 20,
			display_text: {text, name: "Koe", avatar: ""}, actions: null, forwarded: false});`, nil)
	send := func(js string) { p.t.Helper(); p.eval(`koeSend(`+js+`)`, nil) }

	// The next cycle's first tokens can come before the call's frames
	// (tokens go out at once, the frames after what was said before the
	// call is synthesized): the entry still goes where the call was made.
	send(`{type: "control", text: "conversation-chain-start"}, {type: "token", content: "Let me"}, {type: "token", content: " check. "},
		koePiece("Let me check. "), {type: "token", content: "The answer"},
		koeTool("call_1", "calculator", "running", 'Input: {"expression":"6 * 7"}'), koeStep("tool:call_1", "start", "Running calculator")`)
	running := part{Kind: "tool", ID: "call_1", Name: "calculator", State: "running", Badge: "running",
		Input: "{\n  \"expression\": \"6 * 7\"\n}"}
	p.expectParts(-1, textPart("Let me check. "), running, textPart("The answer"))
	if s := p.step(); s != "step running|Running calculator" {
		t.Fatalf("status line %q while the calculator runs", s)
	}
	p.eval(`document.querySelector("#log details.tool").koeFirst = true`, nil)

	// A second call of the same cycle goes after the first; its name,
	// input and status are HTML, shown as text. The status line shows the
	// latest step still running.
	send(`koeTool("call_2", ` + jsString(evil) + `, "running", "Input: " + ` + jsString(evil) + `),
		koeStep("tool:call_2", "start", "Running " + ` + jsString(evil) + `)`)
	evilRunning := part{Kind: "tool", ID: "call_2", Name: evil, State: "running", Badge: "running", Input: evil}
	p.expectParts(-1, textPart("Let me check. "), running, evilRunning, textPart("The answer"))
	if s := p.step(); s != "step running|Running "+evil {
		t.Fatalf("status line %q, want the second call's", s)
	}
	p.screenshot("tool-running.png")

	// The first call ends: updated in place; the second still runs.
	send(`koeTool("call_1", "calculator", "completed", "42"), koeStep("tool:call_1", "end", "calculator finished")`)
	done := running
	done.State, done.Badge, done.OutputLabel, done.Output = "done", "done", "Output", "42"
	p.expectParts(-1, textPart("Let me check. "), done, evilRunning, textPart("The answer"))
	if !p.evalBool(`document.querySelector("#log details.tool").koeFirst === true`) {
		t.Fatal("the entry was replaced, not updated")
	}
	if s := p.step(); s != "step running|Running "+evil {
		t.Fatalf("status line %q after the first call ended, while the second runs", s)
	}

	// The second fails: the entry and the status line show why.
	send(`koeTool("call_2", ` + jsString(evil) + `, "error", "Error: " + ` + jsString(evil) + `),
		koeStep("tool:call_2", "error", "tool failed", ` + jsString(evil) + `)`)
	evilFailed := evilRunning
	evilFailed.State, evilFailed.Badge, evilFailed.OutputLabel, evilFailed.Output = "error", "error", "Error", evil
	p.expectParts(-1, textPart("Let me check. "), done, evilFailed, textPart("The answer"))
	if s := p.step(); s != "step error|tool failed: "+evil {
		t.Fatalf("status line %q after the failure", s)
	}

	// The answer goes on, calls a tool with a long output, and ends.
	long := strings.Repeat("a line of a long file\n", 300)
	send(`{type: "token", content: " is 42."}, koePiece("The answer is 42."),
		koeTool("call_3", "read_file", "running", 'Input: {"path":"notes.txt"}'), koeStep("tool:call_3", "start", "Running read_file"),
		koeTool("call_3", "read_file", "completed", ` + jsString(long) + `), koeStep("tool:call_3", "end", "read_file finished"),
		{type: "token", content: " Done."}, koePiece(" Done.")`)
	read := part{Kind: "tool", ID: "call_3", Name: "read_file", State: "done", Badge: "done",
		Input: "{\n  \"path\": \"notes.txt\"\n}", OutputLabel: "Output", Output: long}
	p.expectParts(-1, textPart("Let me check. "), done, evilFailed, textPart("The answer is 42."), read, textPart(" Done."))
	if s := p.step(); s != "" {
		t.Fatalf("status line %q with nothing running", s)
	}
	var box struct{ Scroll, Client, Height, Window float64 }
	p.eval(`(() => { const d = document.querySelectorAll("#log details.tool")[2]; d.open = true;
		const pre = d.querySelectorAll("pre")[1];
		return {Scroll: pre.scrollHeight, Client: pre.clientHeight, Height: d.closest(".msg").offsetHeight, Window: innerHeight} })()`, &box)
	if box.Scroll <= box.Client || box.Height >= box.Window {
		t.Fatalf("a long output stretches the bubble: %+v", box)
	}
	p.screenshot("tool-frames.png")
	send(`{type: "control", text: "conversation-chain-end"}`)
	p.expectParts(-1, textPart("Let me check. "), done, evilFailed, textPart("The answer is 42."), read, textPart(" Done."))
	if p.evalBool(`document.querySelectorAll("#log img").length > 0 || window.koeAlerted === 1`) {
		t.Fatal("server text was taken as HTML")
	}

	// Stopped after a call, with the next cycle's text shown but not yet
	// heard: the bubble keeps what was heard and the call.
	m := p.mark()
	send(`{type: "control", text: "conversation-chain-start"}, {type: "token", content: "Checking."}, koePiece("Checking."),
		koeTool("call_1", "calculator", "running", 'Input: {"expression":"1 + 1"}'), koeStep("tool:call_1", "start", "Running calculator"),
		koeTool("call_1", "calculator", "completed", "2"), koeStep("tool:call_1", "end", "calculator finished"),
		{type: "token", content: " It is 2."}`)
	p.click("#stop")
	if sig := p.since(m).sent("interrupt-signal"); len(sig) != 1 || sig[0].Text != "Checking." {
		t.Fatalf("interrupt-signals %+v, want one with what was heard", sig)
	}
	two := part{Kind: "tool", ID: "call_1", Name: "calculator", State: "done", Badge: "done",
		Input: "{\n  \"expression\": \"1 + 1\"\n}", OutputLabel: "Output", Output: "2"}
	p.expectParts(-1, textPart("Checking."), two)

	// Stopped while a call runs: the entry stops spinning, the status
	// line goes, and the call's late frames change nothing.
	send(`{type: "control", text: "conversation-chain-start"}, {type: "token", content: "Checking again."}, koePiece("Checking again."),
		koeTool("call_1", "calculator", "running", "Input: not json"), koeStep("tool:call_1", "start", "Running calculator")`)
	p.click("#stop")
	stopped := part{Kind: "tool", ID: "call_1", Name: "calculator", State: "stopped", Badge: "stopped", Input: "not json"}
	p.expectParts(-1, textPart("Checking again."), stopped)
	if s := p.step(); s != "" {
		t.Fatalf("status line %q after Stop", s)
	}
	n := p.evalInt(`document.querySelectorAll("#log .msg").length`)
	send(`koeTool("call_1", "calculator", "completed", "late"), koeStep("tool:call_1", "end", "calculator finished"),
		koeStep("tool:call_2", "start", "Running late")`)
	p.expectParts(-1, textPart("Checking again."), stopped)
	if s := p.step(); s != "" || p.evalInt(`document.querySelectorAll("#log .msg").length`) != n {
		t.Fatalf("late frames of a stopped reply changed the page: status line %q", s)
	}

	// Frames that lack what identifies them are dropped, as OLV's client
	// drops them.
	send(`{type: "control", text: "conversation-chain-start"}, {type: "token", content: "Hm."},
		{type: "tool_call_status", tool_id: "call_1", tool_name: "calculator", status: "running", content: "Input: {}"},
		{type: "tool_call_status", tool_name: "calculator", status: "running", content: "Input: {}", timestamp: "now"},
		koeTool("call_1", "calculator", "pondering", "Input: {}"),
		{type: "status"}, {type: "status", content: "busy"}, koeStep("", "start", "Running nothing"),
		{type: "control", text: "conversation-chain-end"}`)
	p.expectParts(-1, textPart("Hm."))
	if s := p.step(); s != "" {
		t.Fatalf("status line %q from frames without a task", s)
	}
}

func (p *pageT) step() string {
	p.t.Helper()
	var s string
	p.eval(stepJS, &s)
	return s
}

// press presses a key in the focused element.
func (p *pageT) press(key string) {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	if err := p.p.Press(ctx, key); err != nil {
		p.fail(err)
	}
}
