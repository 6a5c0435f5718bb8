package static_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/config"
	"koe/conversation"
	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// What the speaker types, and what the fake LLM answers.
var overlayReplies = map[string]string{
	"greet": "Good evening, chat. How is everyone doing today?",
	"joy":   "[joy] I am so happy today. Thank you all!",
	"again": "Welcome back, everyone. We are live again.",
	"quiet": "Hello there. This is said in silence.",
}

// overlayLong is answered with a reply far longer than the test.
const overlayLong = "long"

const overlayToken = "overlay-test-token"

// overlayPictures are the avatar's pictures, each a plain colour.
var overlayPictures = map[string]color.NRGBA{
	"idle.png":     {200, 40, 40, 255},
	"talk.png":     {40, 200, 40, 255},
	"blink.png":    {40, 40, 200, 255},
	"joy.png":      {220, 220, 40, 255},
	"joy-talk.png": {220, 40, 220, 255},
}

// overlayRecorderJS records, from the start of every document, each src the
// avatar shows and each subtitle, with the piece and the volume slice the
// overlay was at (window.koeOverlay) when it changed; and each volume slice
// the overlay visits (its pacing follows the clock, so a renderer stalled
// on a loaded machine skips slices: what the avatar should have shown is
// judged on the slices it was at).
const overlayRecorderJS = `window.koeTest = {srcs: [], subs: [], slices: []};
document.addEventListener("DOMContentLoaded", () => {
	if (window.koeOverlay) {
		let slice = koeOverlay.slice;
		Object.defineProperty(koeOverlay, "slice", {enumerable: true, configurable: true, get: () => slice, set: (v) => {
			slice = v;
			const last = koeTest.slices[koeTest.slices.length - 1];
			if (v >= 0 && !(last && last.chunk === koeOverlay.chunk && last.slice === v)) koeTest.slices.push({chunk: koeOverlay.chunk, slice: v});
		}});
	}
	const img = document.getElementById("avatar"), sub = document.getElementById("subtitle");
	const at = () => window.koeOverlay ? {chunk: koeOverlay.chunk, slice: koeOverlay.slice} : {chunk: -1, slice: -1};
	new MutationObserver(() => {
		const src = img.getAttribute("src") || "";
		const last = koeTest.srcs[koeTest.srcs.length - 1];
		if (!last || last.src !== src) koeTest.srcs.push(Object.assign({src}, at()));
	}).observe(img, {attributes: true, attributeFilter: ["src"]});
	new MutationObserver(() => {
		if (sub.textContent !== "") koeTest.subs.push(Object.assign({text: sub.textContent}, at()));
	}).observe(sub, {childList: true, characterData: true, subtree: true});
});`

// visitedVolumes are the volumes of the slices of piece chunk that the
// overlay was at, in order; all of them if none was recorded.
func visitedVolumes(visited []srcEntry, chunk int, volumes []float64) []float64 {
	var out []float64
	for _, v := range visited {
		if v.Chunk == chunk && v.Slice >= 0 && v.Slice < len(volumes) {
			out = append(out, volumes[v.Slice])
		}
	}
	if len(out) == 0 {
		return volumes
	}
	return out
}

type srcEntry struct {
	Src   string `json:"src"`
	Chunk int    `json:"chunk"`
	Slice int    `json:"slice"`
}

type subEntry struct {
	Text  string `json:"text"`
	Chunk int    `json:"chunk"`
}

type playedEntry struct {
	Chunk  int     `json:"chunk"`
	Text   string  `json:"text"`
	Silent bool    `json:"silent"`
	MS     float64 `json:"ms"`
}

// TestOverlay drives /overlay in headless Chromium as OBS would show it,
// watching a character that a WebSocket client talks to: subtitles in
// step with the pieces, the avatar following the volumes and emotions,
// a transparent page, interrupts, and a koe restart.
func TestOverlay(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 800, Height: 600, MuteAudio: true,
		AutoplayPolicy: "no-user-gesture-required",
		Args:           []string{"--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"}})
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		if r.UserWords() == overlayLong {
			return fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("On and on we go. ", 2000)), Interval: 5 * time.Millisecond}
		}
		return fakellm.Reply{Tokens: fakellm.Words(overlayReplies[r.UserWords()])}
	})
	cfg := overlayConfig(t, llm)
	koe := koetest.StartKoe(t, cfg)
	conf := cfg.Character.ConfUID

	// Opened with the token, the page is sent on without it (koe sets its
	// cookie), and connects with the cookie as koe's own page does.
	p := openOverlay(t, browser)
	p.navigate("http://" + koe.Addr() + "/overlay?conf=" + conf + "&token=" + overlayToken + "&audio=1&fade=600&blink=3600&color=%23ffee00&size=40&font=serif")
	p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.view !== null && koeOverlay.view.avatar !== null`)
	if s := p.str(`location.search`); strings.Contains(s, "token") || !strings.Contains(s, "conf="+conf) {
		t.Fatalf("the page's address is %q after opening it with the token", s)
	}
	p.waitFor(`document.getElementById("avatar").getAttribute("src") === "/avatars/idle.png" && !document.getElementById("avatar").hidden`)
	if got := p.str(`getComputedStyle(document.getElementById("subtitle")).color + " " + getComputedStyle(document.getElementById("subtitle")).fontFamily`); got != "rgb(255, 238, 0) serif" {
		t.Errorf("subtitle colour and font = %q, want the URL's", got)
	}

	// A turn: every piece's subtitle appears, in order, as the piece
	// starts playing, and the avatar's mouth follows the volumes.
	sp := dialSpeaker(t, koe.Addr())
	pieces := sp.turn("greet")
	if len(pieces) < 2 {
		t.Fatalf("the reply came in %d pieces, want several", len(pieces))
	}
	p.waitFor(fmt.Sprintf(`koeOverlay.played.length === %d`, len(pieces)))
	p.expectSubtitles(0, pieces)
	played := p.played()
	for i, e := range played {
		want := fakellm.SpeechDuration(strings.TrimSpace(pieces[i].Text), 1)
		if e.Silent || e.MS < float64(want.Milliseconds())-50 {
			t.Errorf("piece %d %q played for %.0f ms (silent %v), want its %v of sound", i, e.Text, e.MS, e.Silent, want)
		}
	}
	p.expectLipSync(0, pieces, "/avatars/idle.png", "/avatars/talk.png")

	// The page is transparent where it shows nothing, and not where the
	// subtitle and the avatar are (the subtitle stays up: fade=600).
	p.expectTransparent()

	// Emotions: a piece with [joy] shows the joy pictures, and so do the
	// rest of the reply's pieces; the keyword is not in the subtitle.
	joy := sp.turn("joy")
	if len(joy) < 2 || fmt.Sprint(joy[0].Expressions) != "[3]" {
		t.Fatalf("the [joy] reply came as %+v, want expression 3 on its first piece", joy)
	}
	first := len(pieces)
	p.waitFor(fmt.Sprintf(`koeOverlay.played.length === %d`, first+len(joy)))
	p.expectSubtitles(first, joy)
	p.expectLipSync(first, joy, "/avatars/joy.png", "/avatars/joy-talk.png")

	// An interrupt stops the overlay at once: no subtitle, nothing queued,
	// the plain idle picture.
	sp.send(map[string]any{"type": "text-input", "text": overlayLong, "images": []any{}})
	p.waitFor(fmt.Sprintf(`koeOverlay.chunk >= %d && koeTest.subs.some((s) => s.text === "On and on we go.")`, first+len(joy)+1))
	sp.send(map[string]any{"type": "interrupt-signal", "text": "On and on we go."})
	p.waitFor(`document.getElementById("subtitle").textContent === "" && document.getElementById("caption").classList.contains("hidden") && koeOverlay.pending() === 0`)
	p.waitFor(`document.getElementById("avatar").getAttribute("src") === "/avatars/idle.png"`)

	// koe restarts: the overlay waits without showing anything, then
	// reconnects by itself and shows the next turn.
	sp.close()
	addr := koe.Addr()
	if err := koe.Close(); err != nil {
		t.Fatal(err)
	}
	p.waitFor(`koeOverlay.connection === "reconnecting"`)
	if p.str(`document.getElementById("subtitle").textContent`) != "" || !p.bool(`document.getElementById("caption").classList.contains("hidden")`) {
		t.Fatal("the overlay shows a subtitle while koe is away")
	}
	_, port, _ := net.SplitHostPort(addr)
	cfg.Server.Port, _ = strconv.Atoi(port)
	koe = koetest.StartKoe(t, cfg)
	p.waitFor(`koeOverlay.connects === 2 && koeOverlay.connection === "connected"`)
	sp = dialSpeaker(t, koe.Addr())
	done := p.int(`koeOverlay.chunk`) + 1
	again := sp.turn("again")
	p.waitFor(fmt.Sprintf(`koeOverlay.played.length >= %d && koeOverlay.chunk === %d`, done, done+len(again)-1))
	p.waitFor(`koeOverlay.pending() === 0`)
	p.expectSubtitles(done, again)
	sp.close()

	// Silent (audio=0), the default character: pieces are paced by their
	// durations, the subtitle fades out after the last one, and the idle
	// avatar blinks.
	q := openOverlay(t, browser)
	q.navigate("http://" + koe.Addr() + "/overlay?audio=0&fade=0.3&blink=0.5&position=top")
	q.waitFor(`koeOverlay.connection === "connected" && koeOverlay.confUID === ` + jsString(conf))
	q.waitFor(`koeTest.srcs.some((s) => s.src === "/avatars/blink.png")`)
	sp = dialSpeaker(t, koe.Addr())
	quiet := sp.turn("quiet")
	q.waitFor(fmt.Sprintf(`koeOverlay.played.length === %d && koeOverlay.pending() === 0`, len(quiet)))
	q.expectSubtitles(0, quiet)
	for i, e := range q.played() {
		want := fakellm.SpeechDuration(strings.TrimSpace(quiet[i].Text), 1)
		if !e.Silent || e.MS < float64(want.Milliseconds())-50 {
			t.Errorf("silent piece %d %q took %.0f ms (silent %v), want its %v", i, e.Text, e.MS, e.Silent, want)
		}
	}
	q.waitFor(`document.getElementById("caption").classList.contains("hidden") && getComputedStyle(document.getElementById("caption")).opacity === "0"`)
	sp.close()

	// Subtitles only: no avatar at all.
	r := openOverlay(t, browser)
	r.navigate("http://" + koe.Addr() + "/overlay?conf=" + conf + "&avatar=0")
	r.waitFor(`koeOverlay.connection === "connected" && koeOverlay.view !== null`)
	if !r.bool(`document.getElementById("avatar").hidden && !document.getElementById("avatar").hasAttribute("src")`) {
		t.Fatal("avatar=0 shows an avatar")
	}
}

// overlayConfig is koe with a token, the fake LLM and speech, and an
// avatar of plain-coloured pictures.
func overlayConfig(t testing.TB, llm *fakellm.Server) config.Config {
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), llm.URL()), llm)
	cfg.Server.AuthToken = overlayToken
	cfg.Server.AvatarsDir = t.TempDir()
	for name, c := range overlayPictures {
		img := image.NewNRGBA(image.Rect(0, 0, 120, 160))
		for i := 0; i < len(img.Pix); i += 4 {
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfg.Server.AvatarsDir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Character.Overlay.Avatar = conversation.AvatarConfig{
		Idle: "idle.png", Talking: "talk.png", Blink: "blink.png", Threshold: 0.15,
		Emotions: map[string]string{"joy": "joy.png"}, EmotionsTalking: map[string]string{"joy": "joy-talk.png"},
	}
	return cfg
}

// ---- The speaker: a WebSocket client typing to the character ------------

type speaker struct {
	t  *testing.T
	ws *websocket.Conn
}

// piece is one audio frame as the speaker received it.
type piece struct {
	Text        string
	Volumes     []float64
	Expressions []any
	Audio       bool
}

func dialSpeaker(t *testing.T, addr string) *speaker {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/client-ws?token="+url.QueryEscape(overlayToken), nil)
	if err != nil {
		t.Fatalf("dial the speaker: %v", err)
	}
	_ = resp.Body.Close()
	s := &speaker{t: t, ws: ws}
	t.Cleanup(s.close)
	for s.read()["text"] != "start-mic" {
	}
	return s
}

func (s *speaker) close() { _ = s.ws.Close() }

func (s *speaker) send(v any) {
	s.t.Helper()
	if err := s.ws.WriteJSON(v); err != nil {
		s.t.Fatal(err)
	}
}

func (s *speaker) read() map[string]any {
	s.t.Helper()
	_ = s.ws.SetReadDeadline(time.Now().Add(guard))
	_, data, err := s.ws.ReadMessage()
	if err != nil {
		s.t.Fatalf("speaker: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		s.t.Fatal(err)
	}
	return m
}

// turn types text and returns the reply's pieces; it plays them at once
// (frontend-playback-complete), as a client that is not heard would.
func (s *speaker) turn(text string) []piece {
	s.t.Helper()
	s.send(map[string]any{"type": "text-input", "text": text, "images": []any{}})
	var out []piece
	for {
		m := s.read()
		switch m["type"] {
		case "audio":
			var p piece
			d, _ := m["display_text"].(map[string]any)
			p.Text, _ = d["text"].(string)
			p.Audio = m["audio"] != nil
			vs, _ := m["volumes"].([]any)
			for _, v := range vs {
				f, _ := v.(float64)
				p.Volumes = append(p.Volumes, f)
			}
			if a, ok := m["actions"].(map[string]any); ok {
				p.Expressions, _ = a["expressions"].([]any)
			}
			out = append(out, p)
		case "backend-synth-complete":
			s.send(map[string]any{"type": "frontend-playback-complete"})
		case "control":
			if m["text"] == "conversation-chain-end" {
				return out
			}
		case "error":
			s.t.Fatalf("speaker got an error: %v", m)
		}
	}
}

// ---- The overlay page ------------------------------------------------------

type overlayPage struct {
	t testing.TB
	p *cdp.Page
}

func openOverlay(t testing.TB, browser *cdp.Browser) *overlayPage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	page, err := browser.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := page.AddInitScript(ctx, overlayRecorderJS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ex := page.Exceptions(); len(ex) > 0 {
			t.Errorf("the overlay threw: %q", ex)
		}
	})
	return &overlayPage{t: t, p: page}
}

func (o *overlayPage) fail(err error) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var st any
	_ = o.p.Eval(ctx, `({overlay: Object.assign({}, window.koeOverlay, {view: undefined}), test: window.koeTest})`, &st)
	o.t.Fatalf("%v\nstate: %.3000v\nexceptions: %q", err, st, o.p.Exceptions())
}

func (o *overlayPage) navigate(u string) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := o.p.Navigate(ctx, u); err != nil {
		o.fail(err)
	}
}

func (o *overlayPage) waitFor(cond string) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := o.p.WaitFor(ctx, cond); err != nil {
		o.fail(err)
	}
}

func (o *overlayPage) eval(js string, out any) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := o.p.Eval(ctx, js, out); err != nil {
		o.fail(err)
	}
}

func (o *overlayPage) str(js string) (s string) { o.t.Helper(); o.eval(js, &s); return s }
func (o *overlayPage) bool(js string) (b bool)  { o.t.Helper(); o.eval(js, &b); return b }
func (o *overlayPage) int(js string) (n int)    { o.t.Helper(); o.eval(js, &n); return n }

func (o *overlayPage) played() []playedEntry {
	o.t.Helper()
	var out []playedEntry
	o.eval(`koeOverlay.played`, &out)
	return out
}

// expectSubtitles checks that pieces, the overlay's pieces from first on,
// showed their subtitles in order, each as the piece started: the display
// text without emotion keywords.
func (o *overlayPage) expectSubtitles(first int, pieces []piece) {
	o.t.Helper()
	var subs []subEntry
	o.eval(`koeTest.subs`, &subs)
	var got, want []string
	for _, s := range subs {
		if s.Chunk >= first && s.Chunk < first+len(pieces) {
			got = append(got, fmt.Sprintf("%d:%s", s.Chunk, s.Text))
		}
	}
	for i, p := range pieces {
		text := strings.Join(strings.Fields(strings.ReplaceAll(p.Text, "[joy]", "")), " ")
		want = append(want, fmt.Sprintf("%d:%s", first+i, text))
	}
	if !slices.Equal(got, want) {
		o.fail(fmt.Errorf("subtitles\n%q\nwant\n%q", got, want))
	}
}

// expectLipSync checks the avatar's pictures while pieces (the overlay's
// from first on) played: at every change the picture is the one the
// piece's volume at that moment calls for (talking at or above the
// threshold), and it changed at every change of the volumes' side of the
// threshold: the sequence of pictures is the volumes' sequence.
func (o *overlayPage) expectLipSync(first int, pieces []piece, idle, talking string) {
	o.t.Helper()
	const threshold = 0.15
	var srcs, visited []srcEntry
	o.eval(`koeTest.srcs`, &srcs)
	o.eval(`koeTest.slices`, &visited)
	for i, p := range pieces {
		chunk := first + i
		var got []string
		for _, s := range srcs {
			if s.Chunk != chunk {
				continue
			}
			if s.Slice >= 0 {
				want := idle
				if p.Volumes[s.Slice] >= threshold {
					want = talking
				}
				if s.Src != want {
					o.fail(fmt.Errorf("piece %d at slice %d (volume %.2f) showed %s, want %s", chunk, s.Slice, p.Volumes[s.Slice], s.Src, want))
				}
			}
			got = append(got, s.Src)
		}
		// Each piece starts and ends idle; the picture changes where the
		// volumes cross the threshold.
		want := []string{}
		last := idle
		if i == 0 {
			last = srcBefore(srcs, chunk)
		}
		for _, v := range append(visitedVolumes(visited, chunk, p.Volumes), -1) {
			src := idle
			if v >= threshold {
				src = talking
			}
			if src != last {
				want = append(want, src)
				last = src
			}
		}
		if !slices.Contains(want, talking) || !slices.Equal(got, want) {
			o.fail(fmt.Errorf("piece %d %q showed %q, want %q for volumes %.2f", chunk, p.Text, got, want, p.Volumes))
		}
	}
}

// srcBefore is the picture shown when chunk began.
func srcBefore(srcs []srcEntry, chunk int) string {
	src := ""
	for _, s := range srcs {
		if s.Chunk < chunk {
			src = s.Src
		}
	}
	return src
}

// expectTransparent screenshots the page over a transparent background:
// a corner away from the subtitle and the avatar is fully transparent,
// the subtitle and the avatar are not.
func (o *overlayPage) expectTransparent() {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := o.p.Call(ctx, "Emulation.setDefaultBackgroundColorOverride", map[string]any{"color": map[string]any{"r": 0, "g": 0, "b": 0, "a": 0}}, nil); err != nil {
		o.fail(err)
	}
	o.waitFor(`getComputedStyle(document.getElementById("caption")).opacity === "1" && document.getElementById("subtitle").textContent !== ""`)
	shot, err := o.p.Screenshot(ctx)
	if err != nil {
		o.fail(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		o.fail(err)
	}
	if dir := os.Getenv("KOE_SCREENSHOTS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "overlay.png"), shot, 0o644)
	}
	var rects struct {
		W                float64
		Sub, Avatar, Box [4]float64
	}
	o.eval(`(() => { const r = (id) => { const b = document.getElementById(id).getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
		const top = Math.min(r("avatar")[1], r("caption")[1]);
		return {W: innerWidth, Sub: r("subtitle"), Avatar: r("avatar"), Box: [0, top, innerWidth, innerHeight]}; })()`, &rects)
	scale := float64(img.Bounds().Dx()) / rects.W
	px := func(x, y float64) image.Point { return image.Pt(int(x*scale), int(y*scale)) }
	alpha := func(pt image.Point) uint32 { _, _, _, a := img.At(pt.X, pt.Y).RGBA(); return a }

	// The top right corner: well away from the avatar and the caption at
	// the bottom (Box: from the higher of their tops down).
	b := img.Bounds()
	if top := px(0, rects.Box[1]); top.Y < b.Dy()/4 {
		o.fail(fmt.Errorf("the overlay's box starts at y=%d of %d: no room to test the background", top.Y, b.Dy()))
	}
	for y := b.Min.Y; y < b.Min.Y+b.Dy()/4; y++ {
		for x := b.Max.X - b.Dx()/4; x < b.Max.X; x++ {
			if a := alpha(image.Pt(x, y)); a != 0 {
				o.fail(fmt.Errorf("pixel (%d,%d) of the background has alpha %d, want fully transparent", x, y, a>>8))
			}
		}
	}
	mid := func(r [4]float64) image.Point { return px((r[0]+r[2])/2, (r[1]+r[3])/2) }
	if a := alpha(mid(rects.Avatar)); a>>8 != 255 {
		o.fail(fmt.Errorf("the avatar's middle has alpha %d, want opaque", a>>8))
	}
	var inked int
	for y := int(rects.Sub[1] * scale); y < int(rects.Sub[3]*scale); y++ {
		for x := int(rects.Sub[0] * scale); x < int(rects.Sub[2]*scale); x++ {
			if alpha(image.Pt(x, y)) != 0 {
				inked++
			}
		}
	}
	if inked < 50 {
		o.fail(fmt.Errorf("the subtitle left %d visible pixels", inked))
	}
}

// TestOverlayAutoplayBlocked: where the browser refuses to play sound
// before an interaction (its default policy), audio=1 falls back to
// silent pacing and the subtitles still come, in order.
func TestOverlayAutoplayBlocked(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 800, Height: 600, MuteAudio: true,
		Args: []string{"--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"}})
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words(overlayReplies[r.UserWords()])}
	})
	cfg := overlayConfig(t, llm)
	koe := koetest.StartKoe(t, cfg)
	p := openOverlay(t, browser)
	p.navigate("http://" + koe.Addr() + "/overlay?token=" + overlayToken + "&audio=1&blink=3600")
	p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.confUID !== ""`)
	sp := dialSpeaker(t, koe.Addr())
	pieces := sp.turn("greet")
	p.waitFor(fmt.Sprintf(`koeOverlay.played.length === %d`, len(pieces)))
	p.expectSubtitles(0, pieces)
	if st := p.str(`koeOverlay.audio`); st != "blocked" {
		t.Fatalf("koeOverlay.audio = %q, want blocked", st)
	}
	for i, e := range p.played() {
		want := fakellm.SpeechDuration(strings.TrimSpace(pieces[i].Text), 1)
		if !e.Silent || e.MS < float64(want.Milliseconds())-50 {
			t.Errorf("piece %d %q took %.0f ms (silent %v), want %v in silence", i, e.Text, e.MS, e.Silent, want)
		}
	}
	p.expectLipSync(0, pieces, "/avatars/idle.png", "/avatars/talk.png")
}
