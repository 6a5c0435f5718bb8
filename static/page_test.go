package static_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/app"
	"koe/config"
	"koe/internal/cdp"
	"koe/internal/fakellm"
)

// guard bounds every wait: a wedged page fails the test instead of hanging
// it. It is not a speed assertion.
const guard = 30 * time.Second

// The fake LLM's behaviour, keyed by what the user types.
const (
	slowPrompt = "talk for a long time" // a reply far longer than the test
	failPrompt = "please fail"          // the LLM answers 500
)

// TestChatPage drives koe's own chat page in headless Chromium the way a
// user does: real typing, Enter and mouse clicks against a real koe and a
// fake LLM.
func TestChatPage(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700})

	echo := fakellm.Echo(30 * time.Millisecond)
	llm := startLLM(t, func(r fakellm.Request) fakellm.Reply {
		switch lastUser(r) {
		case slowPrompt:
			// Thousands of fast tokens: the stream is still running when
			// Stop is clicked, and many tokens are in flight at that moment.
			return fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("la ", 5000)), Interval: 5 * time.Millisecond}
		case failPrompt:
			return fakellm.Reply{Status: 500, ErrorMessage: "model crashed"}
		}
		return echo(r)
	})
	koe := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))

	ctx, cancel := context.WithTimeout(context.Background(), guard)
	page, err := browser.NewPage(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	p := &pageT{t: t, p: page}
	t.Cleanup(func() {
		if ex := page.Exceptions(); len(ex) > 0 {
			t.Errorf("the page threw: %q", ex)
		}
	})

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

	// After chain-end the page refreshes the history list.
	p.waitFor(`document.getElementById("stop").disabled`)
	p.waitFor(`document.getElementById("histories").options.length === 2`)
	var hist struct{ UID, Label string }
	p.eval(`({UID: histories.options[1].value, Label: histories.options[1].text})`, &hist)
	if hist.UID == "" || !strings.HasPrefix(hist.Label, want) {
		t.Fatalf("history entry = %+v", hist)
	}

	// Stop interrupts a reply mid-stream and closes the LLM stream.
	p.say(slowPrompt)
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 4 && b[3].Text.length > 0 })()`)
	p.waitFor(`!document.getElementById("stop").disabled`)
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

	// The next turn works, and nothing of the stopped reply leaks into
	// the page: tokens that were in flight when Stop was clicked arrive
	// before this turn's chain-start.
	p.say("are you there?")
	want2 := "You said: are you there?."
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length >= 6 && b[b.length - 1].Text === ` + jsString(want2) + ` })()`)
	var stopped string
	p.eval(`document.querySelectorAll("#log .msg.ai")[1].lastChild.textContent`, &stopped)
	if !strings.HasPrefix(stopped, "la") || len(stopped) >= len(strings.Repeat("la ", 5000)) {
		t.Fatalf("stopped bubble = %.80q", stopped)
	}
	live := []bubble{
		{"human", "Hello koe", false}, {"ai", want, false},
		{"human", slowPrompt, false}, {"ai", stopped, true},
		{"human", "are you there?", false}, {"ai", want2, false},
	}
	p.expectBubbles(live...)
	p.waitFor(`document.getElementById("stop").disabled`)

	// Sending a message while a reply streams cancels that reply the
	// same way.
	p.say(slowPrompt)
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 8 && b[7].Text.length > 0 })()`)
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
	live = append(live,
		bubble{"human", slowPrompt, false}, bubble{"ai", cut, true},
		bubble{"human", "never mind", false}, bubble{"ai", want3, false})
	p.expectBubbles(live...)
	p.waitFor(`document.getElementById("stop").disabled && histories.options.length === 2 &&
		histories.options[1].text.startsWith(` + jsString(want3) + `)`)

	// After a reload the page starts a new conversation; choosing the
	// earlier one from the list shows it again, as stored, including the
	// stopped reply exactly as far as it was shown.
	p.reload()
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	if n := p.evalInt(`document.querySelectorAll("#log .msg").length`); n != 0 {
		t.Fatalf("%d bubbles after reload", n)
	}
	p.waitFor(`[...histories.options].some((o) => o.value === ` + jsString(hist.UID) + `)`)
	p.eval(`histories.value = `+jsString(hist.UID)+`; histories.dispatchEvent(new Event("change"))`, nil)
	p.waitFor(`document.querySelectorAll("#log .msg").length === ` + fmt.Sprint(len(live)))
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
	ctx, cancel = context.WithTimeout(context.Background(), guard)
	defer cancel()
	err = page.Call(ctx, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": 360, "height": 640, "deviceScaleFactor": 1, "mobile": false}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var layout struct{ ScrollWidth, Width, NewRight float64 }
	p.eval(`({ScrollWidth: document.documentElement.scrollWidth, Width: innerWidth,
		NewRight: document.getElementById("new").getBoundingClientRect().right})`, &layout)
	p.screenshot("narrow.png")
	if layout.ScrollWidth > layout.Width || layout.NewRight > layout.Width {
		t.Fatalf("the page overflows a 360px screen: %+v", layout)
	}
}

// bubble is what a chat bubble shows.
type bubble struct {
	Kind        string // human, ai or error
	Text        string // without the speaker label
	Interrupted bool
}

// bubblesJS evaluates to the page's bubbles as [{Kind, Text, Interrupted}].
const bubblesJS = `[...document.querySelectorAll("#log .msg")].map((b) => ({
	Kind: [...b.classList].filter((c) => c !== "msg" && c !== "interrupted").join(" "),
	Text: b.lastChild && b.lastChild.nodeType === Node.TEXT_NODE ? b.lastChild.textContent : "",
	Interrupted: b.classList.contains("interrupted"),
}))`

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

func lastUser(r fakellm.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// The helpers below follow server/harness_test.go.

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func startLLM(t *testing.T, respond func(fakellm.Request) fakellm.Reply) *fakellm.Server {
	t.Helper()
	llm, err := fakellm.Start("127.0.0.1:0", respond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llm.Close() })
	return llm
}

func testConfig(t *testing.T, dataDir, llmURL string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dataDir
	cfg.CharactersDir = filepath.Join(t.TempDir(), "characters")
	cfg.Server.Port = 0
	cfg.Server.BackgroundsDir = filepath.Join(t.TempDir(), "bg")
	cfg.Character.LLM.BaseURL = llmURL
	cfg.Character.LLM.Model = fakellm.ModelID
	cfg.Character.LLM.IdleTimeout = 5 * time.Second
	cfg.Conversation.PlaybackTimeout = 2 * time.Second
	return cfg
}

func startKoe(t *testing.T, cfg config.Config) *app.Main {
	t.Helper()
	m := &app.Main{Config: cfg, Logger: testLogger(t), Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}
