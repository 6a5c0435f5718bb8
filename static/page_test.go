package static_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// guard bounds every wait: a wedged page fails the test instead of hanging
// it. It is not a speed assertion.
const guard = 30 * time.Second

// The fake LLM's behaviour, keyed by what the user types.
const (
	slowPrompt = "talk for a long time" // a reply far longer than the test
	failPrompt = "please fail"          // the LLM answers 500
)

// slowSentence is what the slow reply repeats.
const slowSentence = "La la la. "

// TestChatPage drives koe's own chat page in headless Chromium the way a
// user does: real typing, Enter and mouse clicks against a real koe and a
// fake LLM.
func TestChatPage(t *testing.T) {
	// Chromium's default autoplay policy, as in a user's browser: sound
	// plays because typing and clicking count as interaction.
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700, MuteAudio: true})

	echo := fakellm.Echo(30 * time.Millisecond)
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		switch lastUser(r) {
		case slowPrompt:
			// Thousands of fast tokens: the stream is still running when
			// Stop is clicked, and many tokens and spoken sentences are in
			// flight at that moment.
			return fakellm.Reply{Tokens: fakellm.Words(strings.Repeat(slowSentence, 5000)), Interval: 5 * time.Millisecond}
		case failPrompt:
			return fakellm.Reply{Status: 500, ErrorMessage: "model crashed"}
		}
		return echo(r)
	})
	koe := koetest.StartKoe(t, testConfig(t, t.TempDir(), llm))

	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.waitFor(`document.title === "koe · koe" && document.getElementById("characters").options.length === 1`)
	if p.evalBool(`document.getElementById("stop").disabled`) == false {
		t.Fatal("Stop is enabled before any turn")
	}

	// A typed turn: the human bubble, then the reply streamed token by
	// token into one AI bubble.
	p.eval(`window.koeSnapshots = [];
		new MutationObserver(() => {
			const ai = document.querySelectorAll("#log .msg.ai");
			const s = ai.length ? ai[ai.length - 1].lastChild.textContent : "";
			if (s && s !== koeSnapshots[koeSnapshots.length - 1]) koeSnapshots.push(s);
		}).observe(document.getElementById("log"), {subtree: true, childList: true, characterData: true})`, nil)
	p.say("Hello koe")
	p.waitFor(`document.getElementById("text").value === ""`)
	want := "You said: Hello koe."
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 2 && b[1].Text === ` + jsString(want) + ` })()`)
	var snaps []string
	p.eval(`koeSnapshots`, &snaps)
	if len(snaps) < 2 || snaps[len(snaps)-1] != want {
		t.Fatalf("the reply was not streamed: the AI bubble showed %q", snaps)
	}
	for i := 1; i < len(snaps); i++ {
		if !strings.HasPrefix(snaps[i], snaps[i-1]) {
			t.Fatalf("the AI bubble went from %q to %q", snaps[i-1], snaps[i])
		}
	}
	p.expectBubbles(bubble{"human", "Hello koe", false}, bubble{"ai", want, false})
	// The reply was spoken: Enter counts as interaction, so the browser
	// let the page play sound.
	p.waitFor(`koeDebug.played.length === 1 && koeDebug.played[0].result !== ""`)
	if got := p.played(); got[0].Text != want || got[0].Result != "ended" {
		t.Fatalf("played %+v, want %q to the end", got, want)
	}

	// After chain-end the page refreshes the history list, which names
	// the conversation by its first words and shows it as the one open.
	p.waitFor(`document.getElementById("stop").disabled`)
	p.waitFor(`document.getElementById("histories").options.length === 2`)
	var hist struct{ UID, Label, Open string }
	p.eval(`({UID: histories.options[1].value, Label: histories.options[1].text, Open: histories.value})`, &hist)
	if hist.UID == "" || !strings.HasPrefix(hist.Label, "Hello koe · ") || hist.Open != hist.UID {
		t.Fatalf("history entry = %+v", hist)
	}

	// Stop interrupts a reply mid-stream and closes the LLM stream. The
	// server is told what was heard: the sentences played and the one
	// playing; the bubble keeps just that.
	drain(llm.Disconnects())
	m := p.mark()
	p.say(slowPrompt)
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 4 && b[3].Text.length > 0 })()`)
	p.waitFor(`koeDebug.played.length >= ` + fmt.Sprint(m.played+2))
	p.click("#stop")
	p.waitFor(`document.querySelectorAll("#log .msg.ai")[1].classList.contains("interrupted")`)
	select {
	case <-llm.Disconnects():
	case <-time.After(guard):
		t.Fatal("Stop did not close the LLM stream")
	}
	if !p.evalBool(`document.getElementById("stop").disabled`) {
		t.Fatal("Stop is still enabled after stopping")
	}
	heard := p.expectInterrupt(m)

	// The next turn works, and nothing of the stopped reply leaks into
	// the page: tokens that were in flight when Stop was clicked arrive
	// before this turn's chain-start.
	p.say("are you there?")
	want2 := "You said: are you there?."
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length >= 6 && b[b.length - 1].Text === ` + jsString(want2) + ` })()`)
	var stopped string
	p.eval(`document.querySelectorAll("#log .msg.ai")[1].lastChild.textContent`, &stopped)
	if stopped != heard {
		t.Fatalf("stopped bubble = %.80q, want what was heard: %.80q", stopped, heard)
	}
	live := []bubble{
		{"human", "Hello koe", false}, {"ai", want, false},
		{"human", slowPrompt, false}, {"ai", stopped, true},
		{"human", "are you there?", false}, {"ai", want2, false},
	}
	p.expectBubbles(live...)
	p.waitFor(`document.getElementById("stop").disabled`)

	// Sending a message while a reply streams and speaks cancels that
	// reply the same way.
	drain(llm.Disconnects())
	m = p.mark()
	p.say(slowPrompt)
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 8 && b[7].Text.length > 0 })()`)
	p.waitFor(`koeDebug.played.length >= ` + fmt.Sprint(m.played+1))
	p.say("never mind")
	select {
	case <-llm.Disconnects():
	case <-time.After(guard):
		t.Fatal("a new message did not close the running LLM stream")
	}
	want3 := "You said: never mind."
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length >= 10 && b[b.length - 1].Text === ` + jsString(want3) + ` })()`)
	var cut string
	p.eval(`document.querySelectorAll("#log .msg.ai")[3].lastChild.textContent`, &cut)
	if heard := p.expectInterrupt(m); cut != heard {
		t.Fatalf("cut bubble = %.80q, want what was heard: %.80q", cut, heard)
	}
	live = append(live,
		bubble{"human", slowPrompt, false}, bubble{"ai", cut, true},
		bubble{"human", "never mind", false}, bubble{"ai", want3, false})
	p.expectBubbles(live...)
	p.waitFor(`document.getElementById("stop").disabled && histories.options.length === 2 &&
		histories.options[1].text.startsWith("Hello koe · ")`)

	// After a reload the page goes on in the same conversation: it shows
	// it again, as stored, including the stopped reply exactly as far as
	// it was shown.
	p.reload()
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.waitFor(`document.querySelectorAll("#log .msg").length === ` + fmt.Sprint(len(live)) + ` && histories.value === ` + jsString(hist.UID))
	p.expectBubbles(live...)
	p.screenshot("chat.png")

	// New starts an empty conversation; an LLM failure shows an error
	// bubble and ends the turn.
	p.click("#new")
	p.waitFor(`document.querySelectorAll("#log .msg").length === 0`)
	p.say(failPrompt)
	p.waitFor(`document.querySelector("#log .msg.error") !== null`)
	var errText string
	p.eval(`document.querySelector("#log .msg.error").textContent`, &errText)
	if !strings.Contains(errText, "model crashed") && !strings.Contains(errText, "500") {
		t.Fatalf("error bubble = %q", errText)
	}
	p.waitFor(`document.getElementById("stop").disabled`)
	p.screenshot("error.png")

	// On a phone-sized screen the long history labels must not push the
	// header's controls off-screen.
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	err := p.p.Call(ctx, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": 360, "height": 640, "deviceScaleFactor": 1, "mobile": false}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var layout struct{ ScrollWidth, Width, NewRight, MicRight, MuteRight float64 }
	p.eval(`({ScrollWidth: document.documentElement.scrollWidth, Width: innerWidth,
		NewRight: document.getElementById("new").getBoundingClientRect().right,
		MicRight: document.getElementById("mic").getBoundingClientRect().right,
		MuteRight: document.getElementById("mute").getBoundingClientRect().right})`, &layout)
	p.screenshot("narrow.png")
	if layout.ScrollWidth > layout.Width || layout.NewRight > layout.Width || layout.MicRight > layout.MuteRight || layout.MuteRight > layout.Width {
		t.Fatalf("the page overflows a 360px screen: %+v", layout)
	}
}

// TestChatPageSpeech checks that the page speaks: pieces play in order,
// the server hears once that playback is over, Stop cuts the reply to what
// was heard, mute, and pieces that cannot be played.
func TestChatPageSpeech(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700,
		AutoplayPolicy: "no-user-gesture-required", MuteAudio: true})
	replies := map[string]string{
		"hi": "Hello! I am koe, and I can talk. Nice to meet you.",
		"tell me a story": "Once upon a time there was a little robot. It lived in a lighthouse by the sea. " +
			"Every night it counted the waves. One night it counted to a million. Then it fell asleep, and the sea sang to it.",
		"think first":  "<think>A short answer will do.</think>Yes. That is all.",
		"three parts":  "First part. Second part. Third part.",
		"count slowly": "One. Two. Three. Four. Five. Six. Seven. Eight. Nine. Ten. " + strings.Repeat("And more. ", 100),
	}
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		reply, ok := replies[lastUser(r)]
		if !ok {
			reply = "Okay."
		}
		interval := 10 * time.Millisecond
		if lastUser(r) == "count slowly" {
			interval = 50 * time.Millisecond // still streaming when stopped
		}
		return fakellm.Reply{Tokens: fakellm.Words(reply), Interval: interval}
	})
	koe := koetest.StartKoe(t, testConfig(t, t.TempDir(), llm))
	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.eval(`localStorage.removeItem("koe.mute")`, nil)
	p.reload()
	p.waitFor(`document.getElementById("status").textContent === "connected"`)

	// A spoken reply: every piece plays, in order, to its end; then the
	// page tells the server, once.
	m := p.mark()
	p.say("hi")
	turn := p.waitTurn(m)
	p.expectSpoken(turn)
	p.expectBubbles(bubble{"human", "hi", false}, bubble{"ai", replies["hi"], false})
	if n := p.evalInt(`document.querySelectorAll("#log .speaking, #log .meter").length`); n != 0 {
		t.Fatalf("%d speaking marks after the reply", n)
	}

	// Stop in the middle of the second sentence: playback stops at once
	// and the server gets the two sentences heard, which is what memory
	// and history keep of the reply.
	m = p.mark()
	p.say("tell me a story")
	p.waitFor(`koeDebug.played.length === ` + fmt.Sprint(m.played+2) + ` && koeDebug.played.at(-1).result === ""`)
	p.waitFor(`document.querySelector("#log .msg.ai.speaking .meter") !== null`)
	p.screenshot("speaking.png")
	p.click("#stop")
	heard := p.expectInterrupt(m)
	story := replies["tell me a story"]
	if !strings.HasPrefix(story, heard) || !strings.HasPrefix(heard, "Once upon a time") || heard == story {
		t.Fatalf("heard %q of the story", heard)
	}
	p.waitFor(`document.querySelectorAll("#log .speaking, #log .meter").length === 0`)
	live := []bubble{{"human", "hi", false}, {"ai", replies["hi"], false},
		{"human", "tell me a story", false}, {"ai", heard, true}}
	p.expectBubbles(live...)

	// Frames of the stopped reply that were still on the wire are ignored:
	// nothing more is shown or played, and the page does not answer them.
	m = p.mark()
	p.eval(`koeWire.deliver(JSON.stringify({type: "token", content: " And more."}));
		koeWire.deliver(koeWire.lastAudio);
		koeWire.deliver(JSON.stringify({type: "backend-synth-complete"}))`, nil)
	if s := p.since(m); len(s.Played) != 0 || len(s.Out) != 0 {
		t.Fatalf("after Stop, late frames made the page play %+v and send %+v", s.Played, s.Out)
	}
	p.expectBubbles(live...)

	// The next turn: a think block is shown but silent; the other pieces
	// play. The LLM is given the heard part as the stopped reply.
	m = p.mark()
	p.say("think first")
	turn = p.waitTurn(m)
	if !turn.hasTextOnly() {
		t.Fatalf("no text-only piece in %+v", turn.pieces())
	}
	p.expectSpoken(turn)
	// The latest conversation request (summaries are asked for without
	// streaming, in the background).
	var reqs []fakellm.Request
	for _, r := range llm.Requests() {
		if r.Stream {
			reqs = append(reqs, r)
		}
	}
	if msgs := reqs[len(reqs)-1].Messages; !slices.ContainsFunc(msgs, func(m fakellm.Message) bool {
		return m.Role == "assistant" && m.Content == heard
	}) {
		t.Fatalf("the LLM was not given the heard part %q: %+v", heard, msgs)
	}

	// The history keeps the heard part, marked as interrupted.
	p.waitFor(`histories.options.length === 2`)
	m = p.mark()
	p.eval(`histories.value = histories.options[1].value; histories.dispatchEvent(new Event("change"))`, nil)
	p.waitFor(`koeWire.in.slice(` + fmt.Sprint(m.in) + `).some((f) => f.Type === "history-data")`)
	var stored []record
	for _, f := range p.since(m).In {
		if f.Type == "history-data" {
			stored = f.Messages
		}
	}
	if i := slices.IndexFunc(stored, func(r record) bool { return r.Role == "ai" && r.Interrupted }); i < 0 ||
		stored[i].Content != heard || slices.ContainsFunc(stored[i+1:], func(r record) bool { return r.Interrupted }) {
		t.Fatalf("history %+v, want the AI record %q interrupted", stored, heard)
	}

	// Muted, nothing plays and playback-complete answers
	// backend-synth-complete at once. Mute survives a reload.
	p.click("#mute")
	if !p.evalBool(`document.getElementById("mute").getAttribute("aria-pressed") === "true" && localStorage.getItem("koe.mute") === "1"`) {
		t.Fatal("mute is not shown or not stored")
	}
	p.reload()
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	if !p.evalBool(`document.getElementById("mute").getAttribute("aria-pressed") === "true"`) {
		t.Fatal("mute was forgotten on reload")
	}
	// The reload went on in the conversation; a new one starts here.
	p.waitFor(`!koeDebug.session.restoring`)
	p.click("#new")
	p.waitFor(`document.querySelectorAll("#log .msg").length === 0 && !koeDebug.session.restoring`)
	m = p.mark()
	p.say("hi")
	turn = p.waitTurn(m)
	if len(turn.Played) != 0 {
		t.Fatalf("muted, the page played %+v", turn.Played)
	}
	pc := turn.sent("frontend-playback-complete")
	if len(pc) != 1 || pc[0].During != "backend-synth-complete" {
		t.Fatalf("muted, frontend-playback-complete was sent %+v; want once, in answer to backend-synth-complete", pc)
	}
	p.screenshot("muted.png")

	// Stopped while muted, the reply was read, not heard: the server gets
	// the text shown.
	m = p.mark()
	p.say("count slowly")
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 4 && b[3].Text.includes("Two.") })()`)
	p.click("#stop")
	var shown string
	p.eval(`document.querySelectorAll("#log .msg.ai")[1].lastChild.textContent`, &shown)
	if sig := p.since(m).sent("interrupt-signal"); len(sig) != 1 || sig[0].Text != shown || !strings.HasPrefix(shown, "One. Two.") {
		t.Fatalf("muted, the interrupt-signals %+v do not carry the text shown, %q", sig, shown)
	}
	if s := p.since(m); len(s.Played) != 0 || len(s.sent("frontend-playback-complete")) != 0 {
		t.Fatalf("muted and stopped: played %+v, sent %+v", s.Played, s.Out)
	}

	// Muting in the middle of a reply silences it at once; the rest of the
	// reply is not played and the turn still ends normally.
	p.click("#mute")
	m = p.mark()
	p.say("tell me a story")
	p.waitFor(`koeDebug.played.length === ` + fmt.Sprint(m.played+1) + ` && koeDebug.played.at(-1).result === ""`)
	p.click("#mute")
	turn = p.waitTurn(m)
	last := len(turn.Played) - 1
	for i, e := range turn.Played {
		want := "ended"
		if i == last {
			want = "muted" // it was playing
		}
		if e.Result != want {
			t.Fatalf("muting mid-piece: played %+v, want the last one muted", turn.Played)
		}
	}
	if last < 0 {
		t.Fatal("muting mid-piece: nothing played")
	}
	if pc := turn.sent("frontend-playback-complete"); len(pc) != 1 || pc[0].T < turn.Played[last].End {
		t.Fatalf("muting mid-piece: frontend-playback-complete sent %+v", pc)
	}
	p.click("#mute")

	// A piece that cannot be played is skipped with a notice, once; the
	// turn goes on and ends normally.
	// A piece's text may start with the space after the sentence before.
	p.eval(`koeTamper = (data) => data.replace(/("audio":)"[^"]*"(.*"text":"\s*First part\.)/, '$1"AAAA"$2')
		.replace(/("audio":)"[^"]*"(.*"text":"\s*Second part\.)/, '$1"%%%"$2')`, nil)
	m = p.mark()
	p.say("three parts")
	turn = p.waitTurn(m)
	var results []string
	for _, e := range turn.Played {
		results = append(results, strings.TrimSpace(e.Text)+" "+e.Result)
	}
	if len(results) != 3 || !strings.HasPrefix(results[0], "First part. failed: ") ||
		results[1] != "Second part. failed: InvalidCharacterError" || results[2] != "Third part. ended" {
		t.Fatalf("played %q", results)
	}
	p.expectOneComplete(turn)
	var notice struct {
		Hidden  bool
		Text    string
		Notices []string
	}
	p.eval(`({Hidden: notice.hidden, Text: notice.textContent, Notices: koeDebug.notices})`, &notice)
	if notice.Hidden || notice.Text != "Some speech could not be played." || len(notice.Notices) != 1 {
		t.Fatalf("notice %+v", notice)
	}
	p.eval(`koeTamper = null`, nil)
}

// TestChatPageAutoplayBlocked: in a browser that blocks sound until the
// user interacts with the page, a reply arriving first is shown but not
// spoken, with a notice, and the turn still ends; after a click the page
// speaks.
func TestChatPageAutoplayBlocked(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700,
		AutoplayPolicy: "document-user-activation-required", MuteAudio: true})
	llm := koetest.StartLLM(t, fakellm.Echo(10*time.Millisecond))
	koe := koetest.StartKoe(t, testConfig(t, t.TempDir(), llm))
	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)

	// Submitted by script, which is no user interaction.
	m := p.mark()
	p.eval(`text.value = "Hello. How are you?"; document.getElementById("form").requestSubmit()`, nil)
	turn := p.waitTurn(m)
	if len(turn.Played) == 0 {
		t.Fatal("nothing was tried")
	}
	for _, e := range turn.Played {
		if e.Result != "failed: NotAllowedError" {
			t.Fatalf("played %+v, want every piece blocked", turn.Played)
		}
	}
	p.expectOneComplete(turn)
	var notice struct {
		Hidden bool
		Text   string
	}
	p.eval(`({Hidden: notice.hidden, Text: notice.textContent})`, &notice)
	if notice.Hidden || !strings.Contains(notice.Text, "Click anywhere") {
		t.Fatalf("notice %+v", notice)
	}
	p.screenshot("blocked.png")

	// A click anywhere hides the notice and lets the page speak.
	p.click("#log")
	if !p.evalBool(`notice.hidden`) {
		t.Fatal("the notice stayed after a click")
	}
	m = p.mark()
	p.say("Speak now.")
	p.expectSpoken(p.waitTurn(m))
}

// bubble is what a chat bubble shows.
type bubble struct {
	Kind        string // human, ai or error
	Text        string // without the speaker label
	Interrupted bool
}

// bubblesJS evaluates to the page's bubbles as [{Kind, Text, Interrupted}];
// Text is the bubble's own text, without its label and tool entries.
const bubblesJS = `[...document.querySelectorAll("#log .msg")].map((b) => ({
	Kind: [...b.classList].filter((c) => c !== "msg" && c !== "interrupted" && c !== "speaking").join(" "),
	Text: [...b.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.data).join(""),
	Interrupted: b.classList.contains("interrupted"),
}))`

// wireJS wraps the page's WebSocket before the page's script runs: it
// records every frame in koeWire.in and koeWire.out (with
// performance.now() times, and for a frame sent, which received frame's
// handling sent it), and passes received frames through koeTamper if set.
// koeWire.deliver(data) hands the page a frame as if the server had sent
// it; koeWire.lastAudio is the last audio frame received. Binary frames
// sent are counted in koeWire.binary (wireBinary), not listed.
const wireJS = `(() => {
	const Native = window.WebSocket;
	const wire = window.koeWire = {in: [], out: [], lastAudio: null, deliver: null,
		binary: {Frames: 0, Bytes: 0, Min: 0, Max: 0, Odd: 0, First: 0, Last: 0}};
	let handling = "";
	window.koeTamper = null;
	window.WebSocket = class extends Native {
		get onmessage() { return super.onmessage; }
		set onmessage(f) {
			const handle = (ev) => {
				const data = window.koeTamper ? window.koeTamper(ev.data) : ev.data;
				const m = JSON.parse(data);
				wire.in.push({
					Type: m.type, T: performance.now(),
					Text: m.type === "audio" ? m.display_text.text : (m.text || ""),
					Audio: m.type === "audio" && m.audio !== null,
					Messages: m.type === "history-data" ? m.messages : undefined,
				});
				if (m.type === "audio" && m.audio !== null) wire.lastAudio = data;
				handling = m.type;
				try { return f.call(this, new MessageEvent("message", {data})); } finally { handling = ""; }
			};
			wire.deliver = f && ((data) => handle({data}));
			super.onmessage = f && handle;
		}
		send(data) {
			if (typeof data !== "string") {
				const b = wire.binary, n = data.byteLength, now = performance.now();
				b.Min = b.Frames ? Math.min(b.Min, n) : n;
				b.Max = Math.max(b.Max, n);
				b.Frames++; b.Bytes += n; b.Odd += n % 2;
				b.First = b.First || now; b.Last = now;
				return super.send(data);
			}
			const m = JSON.parse(data);
			wire.out.push({Type: m.type, Text: m.text || "", T: performance.now(), During: handling,
				SampleRate: m.sample_rate, Binary: wire.binary.Frames});
			return super.send(data);
		}
	};
})()`

type wireIn struct {
	Type, Text string
	Audio      bool // an audio frame with sound
	T          float64
	Messages   []record // of history-data
}

type record struct {
	Role, Content string
	Interrupted   bool
}

type wireOut struct {
	Type, Text string
	T          float64
	During     string // the type of the frame whose handling sent it
	SampleRate int    // of raw-audio-config
	Binary     int    // binary frames sent before it
}

// wireBinary counts the binary frames the page sent (koeWire.binary).
type wireBinary struct {
	Frames, Bytes int
	Min, Max      int     // the smallest and largest frame, in bytes
	Odd           int     // frames of an odd number of bytes
	First, Last   float64 // when the first and last were sent
}

// playEntry is one piece the page tried to play (koeDebug.played).
type playEntry struct {
	Text       string
	Start, End float64 // performance.now()
	Duration   float64 // seconds, as the audio element knew it
	Result     string  // "" while playing, "ended", "stopped", "muted", "failed: …"
}

// mark is a position in the page's records.
type mark struct{ in, out, played int }

// since is what the page received, sent and played after a mark.
type since struct {
	In     []wireIn
	Out    []wireOut
	Played []playEntry
}

func (s since) pieces() []wireIn {
	var out []wireIn
	for _, f := range s.In {
		if f.Type == "audio" {
			out = append(out, f)
		}
	}
	return out
}

func (s since) hasTextOnly() bool {
	return slices.ContainsFunc(s.pieces(), func(f wireIn) bool { return !f.Audio })
}

func (s since) sent(typ string) []wireOut {
	var out []wireOut
	for _, f := range s.Out {
		if f.Type == typ {
			out = append(out, f)
		}
	}
	return out
}

func (s since) received(typ, text string) []wireIn {
	var out []wireIn
	for _, f := range s.In {
		if f.Type == typ && (text == "" || f.Text == text) {
			out = append(out, f)
		}
	}
	return out
}

// openPage opens a tab whose WebSocket traffic is recorded (wireJS) and
// whose uncaught exceptions fail the test.
func openPage(t *testing.T, browser *cdp.Browser) *pageT {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	page, err := browser.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := page.AddInitScript(ctx, wireJS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ex := page.Exceptions(); len(ex) > 0 {
			t.Errorf("the page threw: %q", ex)
		}
	})
	return &pageT{t: t, p: page}
}

func (p *pageT) mark() mark {
	p.t.Helper()
	var m struct{ In, Out, Played int }
	p.eval(`({In: koeWire.in.length, Out: koeWire.out.length, Played: koeDebug.played.length})`, &m)
	return mark{m.In, m.Out, m.Played}
}

func (p *pageT) since(m mark) since {
	p.t.Helper()
	var s since
	p.eval(fmt.Sprintf(`({In: koeWire.in.slice(%d), Out: koeWire.out.slice(%d), Played: koeDebug.played.slice(%d)})`,
		m.in, m.out, m.played), &s)
	return s
}

func (p *pageT) played() []playEntry {
	p.t.Helper()
	var out []playEntry
	p.eval(`koeDebug.played`, &out)
	return out
}

// waitTurn waits for the turn started after m to end and returns what
// happened since m.
func (p *pageT) waitTurn(m mark) since {
	p.t.Helper()
	p.waitFor(fmt.Sprintf(`koeWire.in.slice(%d).some((f) => f.Type === "control" && f.Text === "conversation-chain-end")`, m.in))
	return p.since(m)
}

// expectSpoken checks a finished turn in which sound was on: every piece
// with audio was played in order, each to its end and the next only after
// it; text-only pieces were not played; frontend-playback-complete went
// out once, after the last piece ended.
func (p *pageT) expectSpoken(turn since) {
	p.t.Helper()
	var spoken []wireIn
	for _, f := range turn.pieces() {
		if f.Audio {
			spoken = append(spoken, f)
		}
	}
	if len(spoken) == 0 || len(turn.Played) != len(spoken) {
		p.fail(fmt.Errorf("played %+v, want the %d pieces with audio of %+v", turn.Played, len(spoken), turn.pieces()))
	}
	for i, e := range turn.Played {
		if e.Text != spoken[i].Text || e.Result != "ended" {
			p.fail(fmt.Errorf("piece %d: played %+v, want %q to its end", i, e, spoken[i].Text))
		}
		// The fake speaks 60 ms per rune of the sentence; the page played
		// all of it: the element knew that length and it took that long
		// (a lower bound, from the audio clock: not a speed assertion).
		want := fakellm.SpeechDuration(strings.TrimSpace(e.Text), 1).Seconds()
		if math.Abs(e.Duration-want) > 0.002 || e.End-e.Start < 1000*want-20 {
			p.fail(fmt.Errorf("piece %d %q lasted %.0f ms for %.3f s of audio, want %.3f s", i, e.Text, e.End-e.Start, e.Duration, want))
		}
		if i > 0 && e.Start < turn.Played[i-1].End {
			p.fail(fmt.Errorf("piece %d started at %.0f, before piece %d ended at %.0f", i, e.Start, i-1, turn.Played[i-1].End))
		}
	}
	p.expectOneComplete(turn)
}

// expectOneComplete checks that frontend-playback-complete went out once,
// after backend-synth-complete had arrived and after the last piece was
// done with, and before the turn ended.
func (p *pageT) expectOneComplete(turn since) {
	p.t.Helper()
	pc, synth := turn.sent("frontend-playback-complete"), turn.received("backend-synth-complete", "")
	end := turn.received("control", "conversation-chain-end")
	if len(pc) != 1 || len(synth) != 1 || len(end) != 1 {
		p.fail(fmt.Errorf("%d frontend-playback-complete for %d backend-synth-complete and %d chain-end: %+v", len(pc), len(synth), len(end), turn.Out))
	}
	last := 0.0
	for _, e := range turn.Played {
		last = max(last, e.End)
	}
	if pc[0].T < synth[0].T || pc[0].T < last || pc[0].T > end[0].T {
		p.fail(fmt.Errorf("frontend-playback-complete at %.0f; backend-synth-complete came at %.0f, the last piece ended at %.0f, chain-end came at %.0f",
			pc[0].T, synth[0].T, last, end[0].T))
	}
}

// expectInterrupt checks the reply stopped after m: one interrupt-signal
// whose text is the display text of the pieces up to the one playing,
// playback stopped there, no frontend-playback-complete for that reply,
// and nothing of it played afterwards. It returns the interrupt's text.
func (p *pageT) expectInterrupt(m mark) string {
	p.t.Helper()
	s := p.since(m)
	sig := s.sent("interrupt-signal")
	if len(sig) != 1 {
		p.fail(fmt.Errorf("%d interrupt-signals sent: %+v", len(sig), s.Out))
	}
	// The stopped reply's pieces end at the next chain-start, if any.
	next := math.Inf(1)
	for _, f := range s.In {
		if f.Type == "control" && f.Text == "conversation-chain-start" && f.T > sig[0].T {
			next = f.T
			break
		}
	}
	var heard []wireIn // the stopped reply's pieces, up to the one playing
	var played []playEntry
	for _, e := range s.Played {
		if e.Start < sig[0].T {
			played = append(played, e)
		} else if e.Start < next {
			p.fail(fmt.Errorf("%q was played after the interrupt", e.Text))
		}
	}
	if len(played) == 0 {
		p.fail(fmt.Errorf("nothing was played before the interrupt"))
	}
	// The pieces heard: in order, up to the last one played, with the
	// text-only pieces between them.
	k := 0
	for _, f := range s.pieces() {
		if k == len(played) {
			break
		}
		heard = append(heard, f)
		if f.Audio {
			if f.Text != played[k].Text {
				p.fail(fmt.Errorf("piece %q was played where %q came", played[k].Text, f.Text))
			}
			k++
		}
	}
	var want strings.Builder
	for _, f := range heard {
		want.WriteString(f.Text)
	}
	if sig[0].Text != want.String() {
		p.fail(fmt.Errorf("interrupt-signal text %q, want the pieces heard: %q", sig[0].Text, want.String()))
	}
	for i, e := range played {
		want := "ended"
		if i == len(played)-1 {
			want = "stopped" // it was playing
		}
		if e.Result != want {
			p.fail(fmt.Errorf("piece %d %q: %s, want %s", i, e.Text, e.Result, want))
		}
	}
	for _, f := range s.Out {
		if f.Type == "text-input" && f.T > sig[0].T {
			break
		}
		if f.Type == "frontend-playback-complete" {
			p.fail(fmt.Errorf("frontend-playback-complete sent for the stopped reply: %+v", s.Out))
		}
	}
	return sig[0].Text
}

func drain(c <-chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// pageT wraps a cdp.Page with test failures and the guard timeout.
type pageT struct {
	t *testing.T
	p *cdp.Page
}

func (p *pageT) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), guard)
}

// fail reports err with what the page shows, which is usually the
// quickest way to see what went wrong.
func (p *pageT) fail(err error) {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	var got []bubble
	_ = p.p.Eval(ctx, bubblesJS, &got)
	var status string
	_ = p.p.Eval(ctx, `document.getElementById("status").textContent`, &status)
	p.t.Fatalf("%v\nstatus: %q\nbubbles: %#v\nexceptions: %q", err, status, got, p.p.Exceptions())
}

func (p *pageT) navigate(url string) {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	if err := p.p.Navigate(ctx, url); err != nil {
		p.fail(err)
	}
}

func (p *pageT) reload() {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	if err := p.p.Reload(ctx); err != nil {
		p.fail(err)
	}
}

func (p *pageT) waitFor(cond string) {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	if err := p.p.WaitFor(ctx, cond); err != nil {
		p.fail(err)
	}
}

func (p *pageT) eval(js string, out any) {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	if err := p.p.Eval(ctx, js, out); err != nil {
		p.fail(err)
	}
}

func (p *pageT) evalBool(js string) bool {
	p.t.Helper()
	var v bool
	p.eval(js, &v)
	return v
}

func (p *pageT) evalInt(js string) int {
	p.t.Helper()
	var v int
	p.eval(js, &v)
	return v
}

func (p *pageT) click(selector string) {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	if err := p.p.Click(ctx, selector); err != nil {
		p.fail(err)
	}
}

// say types text into the message box and presses Enter.
func (p *pageT) say(text string) {
	p.t.Helper()
	p.click("#text")
	ctx, cancel := p.ctx()
	defer cancel()
	if err := p.p.Type(ctx, text); err != nil {
		p.fail(err)
	}
	if err := p.p.Press(ctx, "Enter"); err != nil {
		p.fail(err)
	}
}

func (p *pageT) expectBubbles(want ...bubble) {
	p.t.Helper()
	var got []bubble
	p.eval(bubblesJS, &got)
	if len(got) != len(want) {
		p.fail(fmt.Errorf("got %d bubbles, want %d:\n%#v", len(got), len(want), want))
	}
	for i := range want {
		if got[i] != want[i] {
			p.fail(fmt.Errorf("bubble %d = %+.120v, want %+.120v", i, got[i], want[i]))
		}
	}
}

// screenshot saves the page as a PNG in the test's temporary directory
// and, if KOE_SCREENSHOT_DIR is set, there too, for a human to look at.
func (p *pageT) screenshot(name string) {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	png, err := p.p.Screenshot(ctx)
	if err != nil {
		p.fail(err)
	}
	dirs := []string{p.t.TempDir()}
	if d := os.Getenv("KOE_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			p.t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		path := filepath.Join(d, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			p.t.Fatal(err)
		}
		p.t.Logf("screenshot: %s", path)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

func lastUser(r fakellm.Request) string { return r.UserWords() }

// testConfig is the shared test configuration speaking through the fake's
// deterministic speech endpoint: a tone, 60 ms per rune
// (fakellm.SpeechDuration).
func testConfig(t *testing.T, dataDir string, llm *fakellm.Server) config.Config {
	return koetest.WithFakeSpeech(koetest.Config(t, dataDir, llm.URL()), llm)
}
