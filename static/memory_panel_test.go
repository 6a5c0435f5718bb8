package static_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// memoryPanelTurns are what the user types, long enough that a summary's
// target length at the lowest rates is above koe's 40-character floor.
var memoryPanelTurns = []string{
	"My name is Ada and I keep bees on a roof in Lisbon, three hives so far.",
	"The bees made forty kilos of honey this summer, most of it from orange trees.",
	"Next spring I want to add a fourth hive and try a top-bar design.",
	"What should I read about top-bar hives before I build one myself?",
	"My neighbour Rui worries about stings, so I planted lavender as a screen.",
	"Remind me to check the hives for varroa mites every second week.",
}

// memoryPanelSummaryPrompt starts the system message of koe's summary
// requests (agent/summarize.go).
const memoryPanelSummaryPrompt = "Summarise the conversation below"

// memoryPanelSummary is the fake LLM's n-th summary (from 1). It holds
// markup, which the panel must show as text, and a dash, which counts as
// one character.
func memoryPanelSummary(n int) string {
	return fmt.Sprintf("Summary %d — Ada keeps bees in Lisbon and plans more hives. <img src=x onerror=window.koeAlerted=1>", n)
}

// memoryPanelTapJS records, after wireJS, the whole memory-state and
// context frames the page receives and the rates it sends.
const memoryPanelTapJS = `(() => {
	const tap = window.koeMemoryTap = {states: [], contexts: [], rates: []};
	const Base = window.WebSocket;
	window.WebSocket = class extends Base {
		get onmessage() { return super.onmessage; }
		set onmessage(f) {
			super.onmessage = f && ((ev) => {
				const m = JSON.parse(ev.data);
				if (m.type === "memory-state") tap.states.push(m);
				if (m.type === "context") tap.contexts.push(m);
				return f.call(this, ev);
			});
		}
		send(data) {
			if (typeof data === "string") {
				const m = JSON.parse(data);
				if (m.type === "set-compression-rate") tap.rates.push(m.rate);
			}
			return super.send(data);
		}
	};
})()`

// memoryPanelContext is a context frame.
type memoryPanelContext struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
		Tokens  int    `json:"tokens"`
	} `json:"messages"`
	ToolTokens       int `json:"tool_tokens"`
	EstimatedTokens  int `json:"estimated_tokens"`
	Budget           int `json:"budget"`
	ContextWindow    int `json:"context_window"`
	Summaries        int `json:"summaries"`
	RawTurns         int `json:"raw_turns"`
	DroppedTurns     int `json:"dropped_turns"`
	DroppedSummaries int `json:"dropped_summaries"`
}

// memoryPanelView is what the panel shows.
type memoryPanelView struct {
	Open      bool
	Count     string // on the Memory button
	Rate      string // the slider's value as shown
	Slider    string // the slider's own value
	Totals    string
	Pending   string // "" while hidden
	Empty     bool   // the empty-state text is shown
	Error     string // "" while hidden
	Summaries []memoryPanelItem
}

type memoryPanelItem struct{ Turns, Range, Stats, Text string }

const memoryPanelViewJS = `(() => {
	const $ = (id) => document.getElementById(id);
	return {
		Open: !$("memory").hidden, Count: $("memory-count").textContent,
		Rate: $("memory-rate-value").textContent, Slider: $("memory-rate").value,
		Totals: $("memory-totals").hidden ? "" : $("memory-totals").textContent,
		Pending: $("memory-pending").hidden ? "" : $("memory-pending").textContent,
		Empty: !$("memory-empty").hidden,
		Error: $("memory-error").hidden ? "" : $("memory-error").textContent,
		Summaries: [...document.querySelectorAll("#memory-summaries > li")].map((li) => ({
			Turns: li.dataset.turns, Range: li.querySelector(".summary-turns").textContent,
			Stats: li.querySelector(".summary-stats").textContent, Text: li.querySelector(".summary-text").textContent,
		})),
	};
})()`

// memoryPanelContextView is what the Last context view shows.
type memoryPanelContextView struct {
	Status, Tokens, Turns, Dropped string
	Messages                       []struct {
		Role, Tokens, TokenText string
		Folded                  bool // the content sits in a closed fold
		Content                 string
	}
}

const memoryPanelContextJS = `(() => {
	const text = (id) => { const e = document.getElementById(id); return e ? e.textContent : ""; };
	return {
		Status: text("context-status"), Tokens: text("context-tokens"), Turns: text("context-turns"), Dropped: text("context-dropped"),
		Messages: [...document.querySelectorAll("#context-messages > li")].map((li) => {
			const fold = li.querySelector("details.ctx-fold"), pre = li.querySelector(".ctx-content");
			return {Role: li.dataset.role, Tokens: li.dataset.tokens, TokenText: li.querySelector(".ctx-tokens").textContent,
				Folded: !!fold && !fold.open, Content: pre ? pre.textContent : ""};
		}),
	};
})()`

// TestMemoryPanel drives the memory panel of koe's page as a user: it
// watches the summaries appear as the conversation grows, moves the
// compression slider and reads the last context, against a real koe whose
// fake LLM holds each summary until the test lets it go.
func TestMemoryPanel(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 1280, Height: 900, MuteAudio: true})

	summaries := make(chan fakellm.Request, 8)
	release := make(chan struct{}, 8)
	stop := make(chan struct{})
	var written atomic.Int64
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		if !memoryPanelIsSummary(r) {
			return fakellm.Echo(5 * time.Millisecond)(r)
		}
		select {
		case summaries <- r:
		case <-stop:
			return fakellm.Reply{Status: 503, ErrorMessage: "the test is over"}
		}
		select {
		case <-release:
		case <-stop:
			return fakellm.Reply{Status: 503, ErrorMessage: "the test is over"}
		}
		return fakellm.Reply{Tokens: fakellm.Words(memoryPanelSummary(int(written.Add(1))))}
	})
	// Before the fake closes: a summary still held must let go of its handler.
	t.Cleanup(func() { close(stop) })
	cfg := testConfig(t, t.TempDir(), llm)
	if err := os.MkdirAll(cfg.CharactersDir, 0o755); err != nil {
		t.Fatal(err)
	}
	other := "conf_name: other\nconf_uid: other_char\ncharacter_name: Other\n"
	if err := os.WriteFile(filepath.Join(cfg.CharactersDir, "other.yaml"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	koe := koetest.StartKoe(t, cfg)

	p := openPage(t, browser)
	{
		ctx, cancel := p.ctx()
		err := p.p.AddInitScript(ctx, memoryPanelTapJS)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	// The documents' count, once in, widens the header: its buttons move
	// then, and a click in between lands beside them.
	p.waitFor(`document.getElementById("doc-summary").textContent !== ""`)
	// Muted, a turn ends as soon as its text is in: no speech to wait for.
	p.click("#mute")

	// The panel opens from the header, empty, with the session's rate.
	if v := memoryPanelRead(p); v.Open {
		t.Fatalf("the memory panel is open before it was asked for: %+v", v)
	}
	p.click("#memory-toggle")
	p.waitFor(`document.getElementById("memory-rate-value").textContent === "0.30"`)
	if v := memoryPanelRead(p); !v.Open || !v.Empty || len(v.Summaries) != 0 || v.Totals != "" || v.Pending != "" || v.Slider != "0.3" || v.Count != "" {
		t.Fatalf("the new panel shows %+v, want it open and empty at rate 0.30", v)
	}

	// Before any LLM call, the last context says so, in the panel.
	p.click("#context > summary")
	p.waitFor(`document.getElementById("context-status").textContent.includes("no LLM call")`)
	if n := p.evalInt(`document.querySelectorAll("#log .msg.error").length`); n != 0 {
		t.Fatalf("the context's refusal went into the chat as %d error bubbles", n)
	}

	orig := func(turns ...int) int {
		n := 0
		for _, i := range turns {
			said := memoryPanelTurns[i-1]
			n += utf8.RuneCountInString(said) + utf8.RuneCountInString("You said: "+said+".")
		}
		return n
	}

	// Three turns: once the third is over, the summary of turns 1–3 is
	// being written, and the panel says so.
	for _, said := range memoryPanelTurns[:3] {
		m := p.mark()
		p.say(said)
		p.waitTurn(m)
	}
	first := memoryPanelNextSummary(t, summaries)
	orig123 := orig(1, 2, 3)
	memoryPanelExpectTarget(t, first, memoryPanelTurns[:3], orig123, 0.3)
	p.waitFor(`document.getElementById("memory-pending").textContent === "1 summary being written"`)
	if v := memoryPanelRead(p); !v.Empty || len(v.Summaries) != 0 {
		t.Fatalf("while the summary is written the panel shows %+v", v)
	}

	// The summary arrives while nobody types; the fourth turn then runs
	// on it.
	release <- struct{}{}
	p.waitFor(`document.querySelectorAll("#memory-summaries > li").length === 1 && document.getElementById("memory-pending").hidden`)
	m := p.mark()
	p.say(memoryPanelTurns[3])
	p.waitTurn(m)
	p.waitFor(`document.getElementById("memory-about").textContent === "4 turns so far"`)
	sum1 := memoryPanelSummary(1)
	chars1 := utf8.RuneCountInString(sum1)
	want := memoryPanelView{
		Open: true, Count: "1", Rate: "0.30", Slider: "0.3",
		Totals: fmt.Sprintf("1 summary covers 3 turns · %s → %s characters · %s saved (%d%%)",
			memoryPanelCount(orig123), memoryPanelCount(chars1), memoryPanelCount(orig123-chars1), memoryPanelPercent(1-float64(chars1)/float64(orig123))),
		Summaries: []memoryPanelItem{memoryPanelWantItem("1,2,3", "turns 1–3", orig123, chars1, "0.30", sum1)},
	}
	memoryPanelExpect(p, want)
	if p.evalBool(`document.querySelector("#memory img") !== null || window.koeAlerted !== undefined`) {
		t.Fatal("the panel took the summary's markup as HTML")
	}

	// The context view, left open, fetched the context after each turn
	// (the first time, before any call, koe refused): after the fourth,
	// every message with its tokens, the summary in the system prompt.
	p.waitFor(`koeMemoryTap.contexts.length === 4 && document.querySelectorAll("#context-messages > li").length > 0`)
	var sent memoryPanelContext
	p.eval(`koeMemoryTap.contexts[3]`, &sent)
	memoryPanelExpectContext(p, sent, sum1, memoryPanelTurns[3])

	// The slider goes to 0.15 with one click on its track; koe answers
	// with the session's new rate, and the next summary is asked for at it.
	m = p.mark()
	memoryPanelClickRange(p, "#memory-rate", 0.15)
	p.waitFor(`koeMemoryTap.states.some((s) => s.compression_rate === 0.15)`)
	p.waitFor(`document.getElementById("memory-rate-value").textContent === "0.15"`)
	var rates []float64
	p.eval(`koeMemoryTap.rates`, &rates)
	if len(rates) != 1 || rates[0] != 0.15 || len(p.since(m).sent("set-compression-rate")) != 1 {
		t.Fatalf("the slider sent the rates %v, want one 0.15", rates)
	}
	for _, said := range memoryPanelTurns[4:6] {
		m := p.mark()
		p.say(said)
		p.waitTurn(m)
	}
	second := memoryPanelNextSummary(t, summaries)
	orig456 := orig(4, 5, 6)
	memoryPanelExpectTarget(t, second, memoryPanelTurns[3:6], orig456, 0.15)
	p.waitFor(`document.getElementById("memory-pending").textContent === "1 summary being written"`)
	release <- struct{}{}
	p.waitFor(`document.querySelectorAll("#memory-summaries > li").length === 2`)
	sum2 := memoryPanelSummary(2)
	chars2 := utf8.RuneCountInString(sum2)
	origAll, charsAll := orig123+orig456, chars1+chars2
	want.Count, want.Rate, want.Slider = "2", "0.15", "0.15"
	want.Totals = fmt.Sprintf("2 summaries cover 6 turns · %s → %s characters · %s saved (%d%%)",
		memoryPanelCount(origAll), memoryPanelCount(charsAll), memoryPanelCount(origAll-charsAll), memoryPanelPercent(1-float64(charsAll)/float64(origAll)))
	want.Summaries = append(want.Summaries, memoryPanelWantItem("4,5,6", "turns 4–6", orig456, chars2, "0.15", sum2))
	memoryPanelExpect(p, want)
	p.screenshot("memory.png")

	// A rate koe refuses (a page whose range koe no longer accepts): the
	// panel shows koe's error, not the chat, and the slider goes back.
	p.eval(`(() => { const r = document.getElementById("memory-rate");
		r.max = "0.6"; r.value = "0.6"; r.dispatchEvent(new Event("change")); r.max = "0.5"; })()`, nil)
	p.waitFor(`!document.getElementById("memory-error").hidden`)
	v := memoryPanelRead(p)
	if !strings.Contains(v.Error, "compression rate 0.60 is outside [0.1, 0.5]") || v.Slider != "0.15" || v.Rate != "0.15" {
		t.Fatalf("after a refused rate the panel shows %+v", v)
	}
	if n := p.evalInt(`document.querySelectorAll("#log .msg.error").length`); n != 0 {
		t.Fatalf("the refusal went into the chat as %d error bubbles", n)
	}

	// New: an empty memory, at the session's rate; the last context waits
	// to be asked for.
	var firstUID string
	p.eval(`koeMemoryTap.states.at(-1).history_uid`, &firstUID)
	states := p.evalInt(`koeMemoryTap.states.length`)
	p.click("#new")
	p.waitFor(fmt.Sprintf(`koeMemoryTap.states.length > %d && koeMemoryTap.states.at(-1).history_uid !== %s`, states, jsString(firstUID)))
	memoryPanelExpect(p, memoryPanelView{Open: true, Rate: "0.15", Slider: "0.15", Empty: true})
	if c := memoryPanelReadContext(p); len(c.Messages) != 0 || c.Tokens != "" {
		t.Fatalf("after New the last context still shows %+v", c)
	}

	// Back to the first conversation: its summaries come back.
	p.waitFor(`[...histories.options].some((o) => o.value === ` + jsString(firstUID) + `)`)
	p.eval(`histories.value = `+jsString(firstUID)+`; histories.dispatchEvent(new Event("change"))`, nil)
	p.waitFor(`document.querySelectorAll("#memory-summaries > li").length === 2`)
	memoryPanelExpect(p, want)

	// Another character: its own memory, at the rate the user chose (koe
	// starts the character at its configured 0.30; the page sets it again).
	states = p.evalInt(`koeMemoryTap.states.length`)
	p.eval(`characters.value = "other.yaml"; characters.dispatchEvent(new Event("change"))`, nil)
	p.waitFor(fmt.Sprintf(`koeMemoryTap.states.length > %d && document.title === "koe · other"`, states))
	p.waitFor(`koeMemoryTap.states.at(-1).compression_rate === 0.15 && document.getElementById("memory-rate-value").textContent === "0.15"`)
	memoryPanelExpect(p, memoryPanelView{Open: true, Rate: "0.15", Slider: "0.15", Empty: true})
	// Its next summary is asked for at that rate.
	for _, said := range memoryPanelTurns[:3] {
		m := p.mark()
		p.say(said)
		p.waitTurn(m)
	}
	memoryPanelExpectTarget(t, memoryPanelNextSummary(t, summaries), memoryPanelTurns[:3], orig123, 0.15)
	release <- struct{}{}
	p.waitFor(`document.querySelectorAll("#memory-summaries > li").length === 1`)

	// The panel stays open across a reload, which goes on with the
	// character, its conversation and the rate chosen, as the slider's
	// tooltip says; × closes it.
	p.reload()
	p.waitFor(`document.getElementById("status").textContent === "connected" && document.title === "koe · other" &&
		koeMemoryTap.states.some((s) => s.compression_rate === 0.15) && document.getElementById("memory-rate-value").textContent === "0.15" &&
		document.querySelectorAll("#memory-summaries > li").length === 1`)
	if v := memoryPanelRead(p); !v.Open {
		t.Fatal("the panel closed on reload")
	}
	p.click("#memory-close")
	if v := memoryPanelRead(p); v.Open || p.evalBool(`document.getElementById("memory-toggle").getAttribute("aria-pressed") !== "false"`) {
		t.Fatalf("× left the panel %+v", v)
	}
}

// TestMemoryPanelNarrow: on a phone-sized screen the open panel covers the
// chat rather than squeezing it, and nothing spills off the screen.
func TestMemoryPanelNarrow(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700, MuteAudio: true})
	llm := koetest.StartLLM(t, fakellm.Echo(0))
	koe := koetest.StartKoe(t, testConfig(t, t.TempDir(), llm))
	p := openPage(t, browser)
	// A browser window is not made that narrow; the page is shown as on a
	// phone instead.
	ctx, cancel := p.ctx()
	err := p.p.Call(ctx, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": 360, "height": 640, "deviceScaleFactor": 1, "mobile": false}, nil)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.click("#memory-toggle")
	p.waitFor(`document.getElementById("memory-rate-value").textContent === "0.30"`)
	var layout struct{ ScrollWidth, Width, PanelLeft, PanelRight, SliderRight, ToggleRight float64 }
	p.eval(`({ScrollWidth: document.documentElement.scrollWidth, Width: innerWidth,
		PanelLeft: document.getElementById("memory").getBoundingClientRect().left,
		PanelRight: document.getElementById("memory").getBoundingClientRect().right,
		SliderRight: document.getElementById("memory-rate").getBoundingClientRect().right,
		ToggleRight: document.getElementById("memory-toggle").getBoundingClientRect().right})`, &layout)
	p.screenshot("memory-narrow.png")
	if layout.ScrollWidth > layout.Width || layout.PanelLeft != 0 || layout.PanelRight > layout.Width || layout.SliderRight > layout.Width || layout.ToggleRight > layout.Width || layout.Width != 360 {
		t.Fatalf("the memory panel does not fit a 360px screen: %+v", layout)
	}
	p.click("#memory-close")
	if !p.evalBool(`document.getElementById("memory").hidden`) {
		t.Fatal("× did not close the panel")
	}
}

func memoryPanelIsSummary(r fakellm.Request) bool {
	return !r.Stream && len(r.Messages) > 0 && r.Messages[0].Role == "system" &&
		strings.HasPrefix(r.Messages[0].Content, memoryPanelSummaryPrompt)
}

// memoryPanelNextSummary waits for the next summary request.
func memoryPanelNextSummary(t *testing.T, c <-chan fakellm.Request) fakellm.Request {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(guard):
		t.Fatal("koe asked for no summary")
		return fakellm.Request{}
	}
}

// memoryPanelExpectTarget checks a summary request: it covers the turns
// said, and asks for int(original characters × rate) characters (koe's
// floor is 40; the turns are long enough to be above it).
func memoryPanelExpectTarget(t *testing.T, r fakellm.Request, said []string, original int, rate float64) {
	t.Helper()
	target := int(float64(original) * rate)
	if target <= 40 {
		t.Fatalf("the test's turns are too short: %d characters at %.2f is at koe's floor", original, rate)
	}
	if got, want := r.Messages[0].Content, fmt.Sprintf("in at most %d characters", target); !strings.Contains(got, want) {
		t.Fatalf("the summary request asks\n%s\nwant %q (%d characters × %.2f)", got, want, original, rate)
	}
	for _, s := range said {
		if !strings.Contains(r.Messages[len(r.Messages)-1].Content, s) {
			t.Fatalf("the summary request does not hold %q:\n%s", s, r.Messages[len(r.Messages)-1].Content)
		}
	}
}

func memoryPanelRead(p *pageT) memoryPanelView {
	p.t.Helper()
	var v memoryPanelView
	p.eval(memoryPanelViewJS, &v)
	return v
}

func memoryPanelReadContext(p *pageT) memoryPanelContextView {
	p.t.Helper()
	var v memoryPanelContextView
	p.eval(memoryPanelContextJS, &v)
	return v
}

func memoryPanelExpect(p *pageT, want memoryPanelView) {
	p.t.Helper()
	got := memoryPanelRead(p)
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		p.fail(fmt.Errorf("the memory panel shows\n%+v\nwant\n%+v", got, want))
	}
}

func memoryPanelWantItem(turns, label string, original, chars int, rate, text string) memoryPanelItem {
	return memoryPanelItem{Turns: turns, Range: label, Text: text,
		Stats: fmt.Sprintf("%s → %s characters (%d%%) · rate %s", memoryPanelCount(original), memoryPanelCount(chars),
			memoryPanelPercent(float64(chars)/float64(original)), rate)}
}

// memoryPanelExpectContext checks the Last context view against the
// context frame koe sent: each message with its role and tokens, long
// ones folded, and the totals.
func memoryPanelExpectContext(p *pageT, sent memoryPanelContext, summary, said string) {
	p.t.Helper()
	if sent.Summaries != 1 || len(sent.Messages) < 2 || sent.Messages[0].Role != "system" ||
		!strings.Contains(sent.Messages[0].Content, summary) || !strings.HasSuffix(sent.Messages[len(sent.Messages)-1].Content, said) {
		p.fail(fmt.Errorf("koe's context does not hold the summary and the fourth turn: %+v", sent))
	}
	got := memoryPanelReadContext(p)
	if len(got.Messages) != len(sent.Messages) {
		p.fail(fmt.Errorf("the context view shows %d messages, koe sent %d", len(got.Messages), len(sent.Messages)))
	}
	for i, m := range sent.Messages {
		g := got.Messages[i]
		tokens := memoryPanelCount(m.Tokens) + " tokens"
		if m.Tokens == 1 {
			tokens = "1 token"
		}
		if m.Tokens <= 0 || g.Role != m.Role || g.Tokens != fmt.Sprint(m.Tokens) || g.TokenText != tokens ||
			g.Content != m.Content || g.Folded != (utf8.RuneCountInString(m.Content) > 240) {
			p.fail(fmt.Errorf("context message %d shows %+v; koe sent %+v", i, g, m))
		}
	}
	plural := func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return memoryPanelCount(n) + " " + many
	}
	tokens := fmt.Sprintf("≈ %s tokens of a %s budget (window %s)", memoryPanelCount(sent.EstimatedTokens), memoryPanelCount(sent.Budget), memoryPanelCount(sent.ContextWindow))
	if sent.ToolTokens > 0 {
		tokens += ", tools " + memoryPanelCount(sent.ToolTokens)
	}
	turns := plural(sent.Summaries, "summary", "summaries") + " · " + plural(sent.RawTurns, "raw turn", "raw turns")
	dropped := "dropped: " + plural(sent.DroppedTurns, "turn", "turns") + ", " + plural(sent.DroppedSummaries, "summary", "summaries")
	if got.Tokens != tokens || got.Turns != turns || got.Dropped != dropped || sent.EstimatedTokens <= 0 {
		p.fail(fmt.Errorf("the context totals show %q, %q, %q; want %q, %q, %q", got.Tokens, got.Turns, got.Dropped, tokens, turns, dropped))
	}
}

// memoryPanelClickRange clicks a range input's track where value lies,
// as a user picks a value: one input and one change event.
func memoryPanelClickRange(p *pageT, selector string, value float64) {
	p.t.Helper()
	var r struct{ Left, Top, Width, Height, Min, Max float64 }
	p.eval(`(() => { const e = document.querySelector(`+jsString(selector)+`); e.scrollIntoView({block: "center"});
		const b = e.getBoundingClientRect();
		return {Left: b.left, Top: b.top, Width: b.width, Height: b.height, Min: Number(e.min), Max: Number(e.max)}; })()`, &r)
	// The thumb's centre travels the track less half a thumb at each end
	// (Chromium's thumb is about 16 px wide).
	const thumb = 16
	x := r.Left + thumb/2 + (value-r.Min)/(r.Max-r.Min)*(r.Width-thumb)
	y := r.Top + r.Height/2
	ctx, cancel := p.ctx()
	defer cancel()
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		ev := map[string]any{"type": typ, "x": x, "y": y}
		if typ != "mouseMoved" {
			ev["button"], ev["clickCount"] = "left", 1
		}
		if err := p.p.Call(ctx, "Input.dispatchMouseEvent", ev, nil); err != nil {
			p.fail(fmt.Errorf("click %s at %.2f: %w", selector, value, err))
		}
	}
}

// memoryPanelCount writes n as the page does (en-US grouping).
func memoryPanelCount(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func memoryPanelPercent(x float64) int { return int(math.Round(x * 100)) }
