package cdp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"koe/testkit"
	"koe/testkit/cdp"
)

func testContext(t *testing.T) context.Context {
	// A generous guard against a wedged browser, not a speed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPage(t *testing.T) {
	b := cdp.LaunchTest(t, cdp.Options{Width: 640, Height: 480})
	ctx := testContext(t)
	p, err := b.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}

	html := `<title>t</title><input id=in><button id=b onclick="this.textContent='clicked'">b</button>
<form id=f><input id=f1></form><p id=sent></p>
<script>document.getElementById("f").onsubmit = (e) => { e.preventDefault(); sent.textContent = f1.value; };</script>`
	if err := p.Navigate(ctx, "data:text/html,"+url.PathEscape(html)); err != nil {
		t.Fatal(err)
	}

	var got struct {
		Title string
		Sum   int
	}
	if err := p.Eval(ctx, `({Title: document.title, Sum: 40 + 2})`, &got); err != nil {
		t.Fatal(err)
	}
	if got.Title != "t" || got.Sum != 42 {
		t.Fatalf("Eval = %+v", got)
	}
	var s string
	if err := p.Eval(ctx, `new Promise((r) => setTimeout(() => r("later"), 10))`, &s); err != nil || s != "later" {
		t.Fatalf("awaited promise = %q, %v", s, err)
	}
	if err := p.Eval(ctx, `undefinedVariable.x`, nil); err == nil || !strings.Contains(err.Error(), "ReferenceError") {
		t.Fatalf("a throwing expression gave %v", err)
	}
	var pe *cdp.Error
	if err := p.Call(ctx, "No.suchMethod", nil, nil); !errors.As(err, &pe) {
		t.Fatalf("unknown method gave %v", err)
	}

	if err := p.Click(ctx, "#b"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, `document.getElementById("b").textContent === "clicked"`); err != nil {
		t.Fatal(err)
	}
	if err := p.Click(ctx, "#nothing"); err == nil {
		t.Fatal("clicking a missing element succeeded")
	}

	if err := p.Eval(ctx, `document.getElementById("f1").focus()`, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Type(ctx, "héllo"); err != nil {
		t.Fatal(err)
	}
	if err := p.Press(ctx, "Enter"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, `document.getElementById("sent").textContent === "héllo"`); err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := p.WaitFor(short, `false`); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor(false) = %v", err)
	}

	if err := p.Eval(ctx, `setTimeout(() => { throw new Error("boom") }, 0)`, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, `new Promise((r) => setTimeout(() => r(true), 20))`); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the page's exception is reported", func() bool { return len(p.Exceptions()) > 0 })
	if ex := p.Exceptions(); len(ex) != 1 || !strings.Contains(ex[0], "boom") {
		t.Fatalf("Exceptions = %q", ex)
	}

	png, err := p.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG: % x", png[:min(8, len(png))])
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Eval(ctx, `1`, nil); !errors.Is(err, cdp.ErrClosed) {
		t.Fatalf("Eval after Close = %v", err)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	b := cdp.LaunchTest(t, cdp.Options{})
	ctx := testContext(t)
	p, err := b.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := p.Eval(ctx, `1`, nil); !errors.Is(err, cdp.ErrClosed) {
		t.Fatalf("Eval after Browser.Close = %v", err)
	}
	if _, err := b.NewPage(ctx); err == nil {
		t.Fatal("NewPage after Close succeeded")
	}
}

func TestLaunchMissingBinary(t *testing.T) {
	_, err := cdp.Launch(testContext(t), cdp.Options{Path: "/nonexistent/chromium", UserDataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/chromium") {
		t.Fatalf("Launch = %v", err)
	}
}

// TestNoGoroutineLeft proves that Close stops every goroutine the package
// started: the page's reader, the process waiter and the output copiers.
func TestNoGoroutineLeft(t *testing.T) {
	path, err := cdp.FindBrowser()
	if err != nil {
		cdp.LaunchTest(t, cdp.Options{}) // skips or fails as the environment demands
	}
	before := runtime.NumGoroutine()
	ctx := testContext(t)
	b, err := cdp.Launch(ctx, cdp.Options{Path: path, UserDataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.NewPage(ctx)
	if err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	if err := p.Eval(ctx, `1`, nil); err != nil {
		t.Error(err)
	}
	if _, err := b.Targets(ctx); err != nil {
		t.Error(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Goroutines finish shortly after they are told to: wait for them
	// rather than expect it at once.
	ended := false
	defer func() {
		if !ended {
			buf := make([]byte, 1<<20)
			t.Logf("goroutines left:\n%s", buf[:runtime.Stack(buf, true)])
		}
	}()
	testkit.Eventually(t, fmt.Sprintf("the %d goroutines before Launch are all that are left after Close", before),
		func() bool { return runtime.NumGoroutine() <= before })
	ended = true
}

// playJS plays a generated 0.2 s WAV without a user gesture and reports
// how that went: "ended", or the name of the error play() rejected with.
const playJS = `(async () => {
	const rate = 8000, n = rate / 5, v = new DataView(new ArrayBuffer(44 + 2 * n));
	const tag = (at, s) => [...s].forEach((c, i) => v.setUint8(at + i, c.charCodeAt(0)));
	tag(0, "RIFF"); v.setUint32(4, 36 + 2 * n, true); tag(8, "WAVEfmt "); v.setUint32(16, 16, true);
	v.setUint16(20, 1, true); v.setUint16(22, 1, true); v.setUint32(24, rate, true);
	v.setUint32(28, 2 * rate, true); v.setUint16(32, 2, true); v.setUint16(34, 16, true);
	tag(36, "data"); v.setUint32(40, 2 * n, true);
	for (let i = 0; i < n; i++) v.setInt16(44 + 2 * i, 8000 * Math.sin(i / 4), true);
	const a = new Audio(URL.createObjectURL(new Blob([v.buffer], {type: "audio/wav"})));
	try { await a.play(); } catch (err) { return err.name; }
	await new Promise((r) => { a.onended = r; });
	return "ended";
})()`

// TestAutoplay checks the autoplay options and the browser behaviour that
// tests of speaking pages rely on: sound without a gesture is blocked
// unless AutoplayPolicy allows it, a real click unblocks it, and muted
// audio still plays to its end.
func TestAutoplay(t *testing.T) {
	page := func(opts cdp.Options) *cdp.Page {
		b := cdp.LaunchTest(t, opts)
		p, err := b.NewPage(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Navigate(testContext(t), "data:text/html,<title>t</title><button id=b>b</button>"); err != nil {
			t.Fatal(err)
		}
		return p
	}
	play := func(p *cdp.Page) string {
		var s string
		if err := p.Eval(testContext(t), playJS, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	p := page(cdp.Options{MuteAudio: true})
	if got := play(p); got != "NotAllowedError" {
		t.Errorf("default policy, no gesture: %s, want NotAllowedError", got)
	}
	if err := p.Click(testContext(t), "#b"); err != nil {
		t.Fatal(err)
	}
	if got := play(p); got != "ended" {
		t.Errorf("default policy, after a click: %s", got)
	}
	if got := play(page(cdp.Options{AutoplayPolicy: "no-user-gesture-required", MuteAudio: true})); got != "ended" {
		t.Errorf("no-user-gesture-required: %s", got)
	}
}

func TestAddInitScript(t *testing.T) {
	b := cdp.LaunchTest(t, cdp.Options{})
	ctx := testContext(t)
	p, err := b.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AddInitScript(ctx, `window.early = document.scripts.length`); err != nil {
		t.Fatal(err)
	}
	// The page's own script sees what the init script set up.
	html := `<title>t</title><script>window.seen = window.early</script>`
	for range 2 { // in every document loaded
		if err := p.Navigate(ctx, "data:text/html,"+url.PathEscape(html)); err != nil {
			t.Fatal(err)
		}
		seen := -1
		if err := p.Eval(ctx, `typeof window.seen === "number" ? window.seen : -1`, &seen); err != nil || seen != 0 {
			t.Fatalf("the page saw %d, %v; want 0 (the init script ran before any script)", seen, err)
		}
	}
}
