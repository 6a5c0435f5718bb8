package static_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/client"
	"koe/livechat"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/ircdtest"
	"koe/testkit/koetest"
)

// Issue 27 on the OBS overlay: a turn reaches the overlay watching its
// character whatever started it (the chat API too), a live skip clears
// the overlay within the piece it was playing, and an overlay that opens
// mid-reply picks the reply up instead of staying idle.

// overlayStreamJS records, in every overlay document and on the page's own
// clock (performance.now()), each frame its WebSocket receives and each
// change of the subtitle, a cleared one included (overlayRecorderJS keeps
// only the shown ones). The frame listener is added in the socket's
// constructor, before the page sets its onmessage: its time is the
// frame's arrival, ahead of the overlay's handling of it. A test may set
// koeStream.onSub to act as a subtitle changes.
const overlayStreamJS = `window.koeStream = {frames: [], subs: []};
(() => {
	const Native = window.WebSocket;
	window.WebSocket = class extends Native {
		constructor(...args) {
			super(...args);
			this.addEventListener("message", (ev) => {
				let m = {};
				try { m = JSON.parse(ev.data); } catch (e) { /* not JSON: recorded untyped */ }
				const text = m.type === "audio" ? ((m.display_text && m.display_text.text) || "") : (typeof m.text === "string" ? m.text : "");
				koeStream.frames.push({type: m.type || "", text, t: performance.now()});
			});
		}
	};
})();
document.addEventListener("DOMContentLoaded", () => {
	const sub = document.getElementById("subtitle");
	new MutationObserver(() => {
		const s = {text: sub.textContent, chunk: window.koeOverlay ? koeOverlay.chunk : -1, t: performance.now()};
		koeStream.subs.push(s);
		if (koeStream.onSub) koeStream.onSub(s);
	}).observe(sub, {childList: true, characterData: true, subtree: true});
});`

// streamFrame and streamSub are overlayStreamJS's records.
type streamFrame struct {
	Type string  `json:"type"`
	Text string  `json:"text"`
	T    float64 `json:"t"`
}

type streamSub struct {
	Text  string  `json:"text"`
	Chunk int     `json:"chunk"`
	T     float64 `json:"t"`
}

// launchStreamBrowser starts Chromium as OBS runs a browser source: sound
// plays without a click (muted here), and a page that is not in front (a
// second overlay opened beside the first) plays in time.
func launchStreamBrowser(tb testing.TB) *cdp.Browser {
	tb.Helper()
	return cdp.LaunchTest(tb, cdp.Options{Width: 800, Height: 600, MuteAudio: true, AutoplayPolicy: "no-user-gesture-required",
		Args: []string{"--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"}})
}

// openStreamOverlay is openOverlay with overlayStreamJS recording too.
func openStreamOverlay(tb testing.TB, browser *cdp.Browser) *overlayPage {
	tb.Helper()
	p := openOverlay(tb, browser)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := p.p.AddInitScript(ctx, overlayStreamJS); err != nil {
		tb.Fatal(err)
	}
	return p
}

func (o *overlayPage) streamSubs(from int) []streamSub {
	o.t.Helper()
	var out []streamSub
	o.eval(fmt.Sprintf(`koeStream.subs.slice(%d)`, from), &out)
	return out
}

func (o *overlayPage) streamFrames(from int) []streamFrame {
	o.t.Helper()
	var out []streamFrame
	o.eval(fmt.Sprintf(`koeStream.frames.slice(%d)`, from), &out)
	return out
}

// shownTexts are the texts of the subtitles shown, trimmed, cleared ones
// left out.
func shownTexts(subs []streamSub) []string {
	var out []string
	for _, s := range subs {
		if t := strings.TrimSpace(s.Text); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// TestOverlayShowsChatAPITurn: a bot's turn over the chat API (POST
// /api/chat/stream) is said by the overlay's character, so the overlay
// shows it: each piece of the answer as a subtitle, in order, then the
// overlay goes back to idle.
func TestOverlayShowsChatAPITurn(t *testing.T) {
	testkit.External(t, "Chromium")
	browser := launchStreamBrowser(t)
	const question = "what does the overlay show"
	const answer = "The overlay shows this answer. It came through the chat API. Nobody typed it in a browser."
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		if r.UserWords() == question {
			return fakellm.Reply{Tokens: fakellm.Words(answer)}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Something else.")}
	})
	cfg := overlayConfig(t, llm)
	koe := koetest.StartKoe(t, cfg)
	conf := cfg.Character.ConfUID

	p := openStreamOverlay(t, browser)
	p.navigate("http://" + koe.Addr() + "/overlay?conf=" + conf + "&token=" + overlayToken + "&audio=1&fade=0.3&blink=3600")
	p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.view !== null`)
	p.waitFor(`document.getElementById("avatar").getAttribute("src") === "/avatars/idle.png"`)

	c, err := client.New("http://"+koe.Addr(), client.WithToken(overlayToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	var said string
	for ev, err := range c.Stream(ctx, protocol.ChatRequest{Message: question, ConfUID: conf}) {
		if err != nil {
			t.Fatalf("chat API stream: %v", err)
		}
		if ev.Type == "message" && ev.Message.Type == protocol.MessageAI {
			said = ev.Message.Content
		}
	}
	if said != answer {
		t.Fatalf("the chat API answered %q, want %q", said, answer)
	}

	// The answer's pieces, each as it was played (text only: paced in
	// silence), then nothing queued, the subtitle faded, the idle picture.
	p.waitFor(`koeOverlay.played.map((e) => e.text.trim()).join(" ") === ` + jsString(answer))
	p.waitFor(`koeOverlay.pending() === 0 && document.getElementById("caption").classList.contains("hidden") && getComputedStyle(document.getElementById("caption")).opacity === "0"`)
	p.waitFor(`document.getElementById("avatar").getAttribute("src") === "/avatars/idle.png"`)
	var subs []subEntry
	p.eval(`koeTest.subs`, &subs)
	var shown []string
	for i, s := range subs {
		if s.Chunk != i {
			t.Fatalf("subtitle %d %q came at piece %d: subtitles %+v", i, s.Text, s.Chunk, subs)
		}
		shown = append(shown, strings.TrimSpace(s.Text))
	}
	if strings.Join(shown, " ") != answer || len(shown) < 2 {
		t.Fatalf("the overlay's subtitles were %q, want the pieces of %q in order", shown, answer)
	}
	for _, e := range p.played() {
		if !e.Silent {
			t.Errorf("piece %d %q played sound; a chat API turn has none", e.Chunk, e.Text)
		}
	}
}

// ---- Live chat ------------------------------------------------------------

// overlayStory is the live reply that gets skipped: pieces of a few
// seconds each (60 ms a rune), no commas (no early cut), its number in
// the first.
func overlayStory(n int) string {
	return fmt.Sprintf("Story number %d begins with a quiet fox. ", n) +
		"The fox kept a small garden by the river. " +
		"Every morning she watered the tall sunflowers. " +
		"One day a grey heron landed among the beans. " +
		"They became friends and shared the harvest."
}

// overlayNext is the live reply after a skipped one.
const overlayNext = "Thanks for waiting everyone. Here is the next answer."

// overlayLive is koe with the live chat on a real IRC server (ngircd
// standing in for Twitch), its character the overlay's, and a viewer in
// the channel; "story N" is answered with overlayStory(N), "next" with
// overlayNext.
type overlayLive struct {
	tb     testing.TB
	addr   string
	conf   string
	viewer *ircdtest.Chatter
}

func startOverlayLive(tb testing.TB) *overlayLive {
	tb.Helper()
	irc := ircdtest.Start(tb, "")
	llm := koetest.StartLLM(tb, func(r fakellm.Request) fakellm.Reply {
		words := r.UserWords()
		var n int
		if i := strings.Index(words, `says: "story `); i >= 0 {
			if _, err := fmt.Sscanf(words[i+len(`says: "story `):], "%d", &n); err == nil {
				return fakellm.Reply{Tokens: fakellm.Words(overlayStory(n))}
			}
		}
		if strings.Contains(words, `says: "next"`) {
			return fakellm.Reply{Tokens: fakellm.Words(overlayNext)}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Something else.")}
	})
	cfg := overlayConfig(tb, llm)
	withLiveChat(&cfg, irc)
	// A benchmark's many turns from one viewer are not rate-limited.
	cfg.LiveChat.MaxPerMinute, cfg.LiveChat.MaxPerViewerPerMinute = 10000, 10000
	l := &overlayLive{tb: tb, addr: koetest.StartKoe(tb, cfg).Addr(), conf: cfg.Character.ConfUID}
	// A message sent before koe is in the channel would not reach it.
	testkit.Eventually(tb, "the live chat in the channel", func() bool {
		st := l.status()
		return len(st.Sources) == 1 && st.Sources[0].Connected
	})
	l.viewer = ircdtest.NewChatter(tb, irc.Plain, "alice", "koe")
	return l
}

// status is GET /api/live.
func (l *overlayLive) status() livechat.Status {
	l.tb.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+l.addr+"/api/live", nil)
	if err != nil {
		l.tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+overlayToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.tb.Fatalf("live status: %v", err)
	}
	defer resp.Body.Close()
	var st livechat.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		l.tb.Fatalf("live status: HTTP %d, %v", resp.StatusCode, err)
	}
	return st
}

// say has the viewer write msg in the channel.
func (l *overlayLive) say(msg string) { l.tb.Helper(); l.viewer.Send("PRIVMSG #koe :" + msg) }

// openOverlay opens an overlay on the live character, with sound (the
// pieces last as long as their audio) and a subtitle that stays until
// something clears it.
func (l *overlayLive) openOverlay(browser *cdp.Browser) *overlayPage {
	l.tb.Helper()
	p := openStreamOverlay(l.tb, browser)
	p.navigate("http://" + l.addr + "/overlay?conf=" + l.conf + "&token=" + overlayToken + "&audio=1&fade=600&blink=3600")
	p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.view !== null`)
	return p
}

// overlaySkipped is one skip as the overlay saw it, on its clock: from
// the skip request's sending to the interrupt frame's arrival and to the
// subtitle's clearing.
type overlaySkipped struct {
	Chunk     int // the piece playing when the skip was sent
	Interrupt time.Duration
	Cleared   time.Duration
}

// skipStory has the viewer ask for story n and skips the live reply from
// the page (POST /api/live/skip, the streamer's command) as the overlay
// starts playing its second piece or a later one, once the reply is all
// sent (backend-synth-complete): the turn is only waiting for it to be
// heard. Sent from the page as the piece starts, the skip has the whole
// piece's time to arrive, however slow the test's polling. It returns
// once the overlay has cleared, failing if the overlay started another
// piece of the story first.
func (l *overlayLive) skipStory(p *overlayPage, n int) overlaySkipped {
	l.tb.Helper()
	frames := p.int(`koeStream.frames.length`)
	first := p.int(`koeOverlay.chunk`) + 1
	last := first + len(strings.SplitAfter(strings.TrimSpace(overlayStory(n)), ". ")) - 1
	p.eval(fmt.Sprintf(`koeStream.skip = null; koeStream.onSub = (s) => {
		if (s.text === "" || s.chunk < %d || !koeStream.frames.slice(%d).some((f) => f.type === "backend-synth-complete")) return;
		koeStream.onSub = null;
		const skip = koeStream.skip = {chunk: s.chunk, subs: koeStream.subs.length, at: performance.now(), status: 0, skipped: false};
		fetch("/api/live/skip", {method: "POST"})
			.then((r) => { skip.status = r.status; return r.json(); })
			.then((b) => { skip.skipped = b.skipped === true; }, (e) => { skip.error = String(e); });
	}`, first+1, frames), nil)
	l.say(fmt.Sprintf("story %d", n))
	p.waitFor(`koeStream.skip && (koeStream.skip.skipped || koeStream.skip.error || koeStream.skip.status > 0 && koeStream.skip.status !== 200)`)
	var sent struct {
		Chunk   int     `json:"chunk"`
		Subs    int     `json:"subs"` // the subtitles recorded before the skip
		At      float64 `json:"at"`
		Status  int     `json:"status"`
		Skipped bool    `json:"skipped"`
		Error   string  `json:"error"`
	}
	p.eval(`koeStream.skip`, &sent)
	if sent.Status != http.StatusOK || !sent.Skipped {
		p.fail(fmt.Errorf("POST /api/live/skip: HTTP %d, skipped %v %s", sent.Status, sent.Skipped, sent.Error))
	}
	if sent.Chunk >= last {
		p.fail(fmt.Errorf("the skip went out at piece %d, the story's last (%d-%d): nothing left to skip", sent.Chunk, first, last))
	}
	// Whichever comes first: the overlay cleared, or a later piece began.
	p.waitFor(fmt.Sprintf(`koeStream.subs.slice(%d).some((s) => s.text === "" || s.chunk > %d)`, sent.Subs, sent.Chunk))
	after := p.streamSubs(sent.Subs)
	if c := after[0]; c.Text != "" || c.Chunk != sent.Chunk {
		p.fail(fmt.Errorf("skipped at piece %d, the overlay went on to piece %d %q instead of clearing: subtitles since %+v", sent.Chunk, c.Chunk, c.Text, after))
	}
	if !p.bool(`document.getElementById("caption").classList.contains("hidden") && koeOverlay.pending() === 0`) {
		p.fail(fmt.Errorf("the overlay cleared its subtitle but still shows its caption or holds pieces"))
	}
	got := overlaySkipped{Chunk: sent.Chunk, Cleared: pageDuration(after[0].T - sent.At), Interrupt: -1}
	for _, f := range p.streamFrames(frames) {
		if f.Type == "control" && f.Text == "interrupt" {
			got.Interrupt = pageDuration(f.T - sent.At)
			break
		}
	}
	return got
}

// pageDuration is a span of the page's clock, in milliseconds.
func pageDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// TestOverlayLiveSkip: the streamer skips a live reply while the overlay
// plays it (its text and audio all sent: the turn only waits for it to be
// heard). The overlay stops within the piece it was playing: the subtitle
// clears before any later piece of the reply starts, and the next live
// turn's first piece is the very next piece the overlay plays, at once,
// with no lag carried over. The time from the skip request to the
// cleared overlay is logged (BenchmarkOverlayLiveSkip measures it).
func TestOverlayLiveSkip(t *testing.T) {
	testkit.External(t, "Chromium")
	browser := launchStreamBrowser(t)
	l := startOverlayLive(t)
	p := l.openOverlay(browser)

	skip := l.skipStory(p, 1)
	t.Logf("skip at piece %d: interrupt on the overlay after %v, subtitle cleared after %v", skip.Chunk, skip.Interrupt, skip.Cleared)
	subs := p.int(`koeStream.subs.length`)

	// The next turn: its pieces follow the skipped one's directly (the
	// overlay's piece count moves on by one), and nothing of the story
	// comes back.
	l.say("next")
	p.waitFor(`koeOverlay.played.some((e) => e.text.trim() === "Here is the next answer.") && koeOverlay.pending() === 0`)
	next := p.streamSubs(subs)
	if shown := shownTexts(next); strings.Join(shown, " ") != overlayNext {
		p.fail(fmt.Errorf("after the skip the overlay showed %q, want only the pieces of %q", shown, overlayNext))
	}
	if next[0].Chunk != skip.Chunk+1 {
		p.fail(fmt.Errorf("the next reply began at piece %d, after piece %d was skipped: pieces played in between (subtitles %+v)", next[0].Chunk, skip.Chunk, next))
	}
	for _, e := range p.played() {
		if e.Chunk >= skip.Chunk && !strings.Contains(overlayNext, strings.TrimSpace(e.Text)) {
			p.fail(fmt.Errorf("piece %d %q of the skipped story played to its end", e.Chunk, e.Text))
		}
	}
	st := testkit.Await(t, "the skipped turn counted", func() (livechat.Status, bool) {
		st := l.status()
		return st, st.Skipped == 1 && st.Spoken == 1 && !st.Running
	})
	if st.Failed != 0 {
		t.Fatalf("live status after the skip: %+v", st)
	}
}

// BenchmarkOverlayLiveSkip measures, in the overlay's page, the time from
// POST /api/live/skip to the interrupt's arrival and to the cleared
// subtitle, over b.N skipped live replies (go test -run '^$' -bench
// OverlayLiveSkip -benchtime 10x ./static). A turn takes seconds of
// speech: the ns/op is that, the skip's times are the metrics.
func BenchmarkOverlayLiveSkip(b *testing.B) {
	testkit.External(b, "Chromium")
	browser := launchStreamBrowser(b)
	l := startOverlayLive(b)
	p := l.openOverlay(browser)
	var cleared, interrupt []time.Duration
	n := 0
	for b.Loop() {
		n++
		s := l.skipStory(p, n)
		cleared, interrupt = append(cleared, s.Cleared), append(interrupt, s.Interrupt)
		// The next story waits for this turn to be over.
		testkit.Eventually(b, "the skipped turn over", func() bool { return !l.status().Running })
	}
	slices.Sort(cleared)
	slices.Sort(interrupt)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(cleared[len(cleared)/2]), "cleared-p50-ms")
	b.ReportMetric(ms(cleared[len(cleared)-1]), "cleared-max-ms")
	b.ReportMetric(ms(interrupt[len(interrupt)/2]), "interrupt-p50-ms")
	b.ReportMetric(ms(interrupt[len(interrupt)-1]), "interrupt-max-ms")
	b.Logf("%d skips: cleared %v, interrupt %v", len(cleared), cleared, interrupt)
}

// TestOverlayJoinsMidTurn: an overlay opened while a live reply is being
// spoken (OBS reloading its browser source) shows a piece of that reply at
// once, not idle until the next turn, and follows it to its end, in
// order, with sound.
func TestOverlayJoinsMidTurn(t *testing.T) {
	testkit.External(t, "Chromium")
	browser := launchStreamBrowser(t)
	l := startOverlayLive(t)
	story := overlayStory(7)
	pieces := strings.SplitAfter(strings.TrimSpace(story), ". ")
	for i := range pieces {
		pieces[i] = strings.TrimSpace(pieces[i])
	}

	// The first overlay hears the whole reply; the second opens while
	// the first plays the reply's second piece.
	a := l.openOverlay(browser)
	l.say("story 7")
	a.waitFor(`koeOverlay.chunk >= 1`)
	if c := a.int(`koeOverlay.chunk`); c >= len(pieces)-2 {
		a.fail(fmt.Errorf("the first overlay is at piece %d of %d already: too late to join mid-reply", c, len(pieces)))
	}
	b := l.openOverlay(browser)
	// Whichever comes first: a subtitle, or the reply's end.
	b.waitFor(`koeStream.subs.some((s) => s.text !== "") || koeStream.frames.some((f) => f.type === "control" && f.text === "conversation-chain-end")`)
	joined := b.streamSubs(0)
	if len(shownTexts(joined)) == 0 {
		b.fail(fmt.Errorf("the overlay that joined mid-reply showed nothing of it (frames %+v)", b.streamFrames(0)))
	}
	for _, f := range b.streamFrames(0) {
		if f.Type == "control" && f.Text == "conversation-chain-end" && f.T < joined[0].T {
			b.fail(fmt.Errorf("the overlay that joined mid-reply showed %q only after the reply's end", joined[0].Text))
		}
	}

	// It follows to the end: the reply's pieces from the one it joined at
	// (not the first: that one was over), in order, each with its sound.
	b.waitFor(fmt.Sprintf(`koeOverlay.played.some((e) => e.text.trim() === %s) && koeOverlay.pending() === 0`, jsString(pieces[len(pieces)-1])))
	shown := shownTexts(b.streamSubs(0))
	at := slices.Index(pieces, shown[0])
	if at < 1 || !slices.Equal(shown, pieces[at:]) {
		b.fail(fmt.Errorf("the overlay that joined mid-reply showed %q, want the pieces of %q from the second on", shown, pieces))
	}
	for _, e := range b.played() {
		want := fakellm.SpeechDuration(strings.TrimSpace(e.Text), 1)
		if e.Silent || e.MS < float64(want.Milliseconds())-50 {
			t.Errorf("piece %d %q played for %.0f ms (silent %v), want its %v of sound", e.Chunk, e.Text, e.MS, e.Silent, want)
		}
	}
	a.waitFor(fmt.Sprintf(`koeOverlay.played.length === %d && koeOverlay.pending() === 0`, len(pieces)))
	if shown := shownTexts(a.streamSubs(0)); !slices.Equal(shown, pieces) {
		a.fail(fmt.Errorf("the first overlay showed %q, want %q", shown, pieces))
	}
}
