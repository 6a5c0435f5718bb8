package static_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// Issue 31 on the overlay in a broadcaster: OBS's browser source is a
// Chromium page of the canvas's size, on a transparent background, that
// may play sound without a click. The avatar stays where it is put
// whatever the subtitle's width, and the subtitle never shows the marks
// a reply carries for koe (citations, emotion keywords).

// obsReply is the reply of a turn: a short first sentence, then long
// ones (no comma outside a mark: the first piece ends at its period), with
// an emotion keyword and citation marks.
const obsReply = "[joy] Hi. This sentence is a great deal longer than the first one so that its subtitle runs " +
	"across most of the canvas and wraps onto a second line [1]. Short again [2, 3]."

// obsShown is obsReply's pieces as the overlay must show them.
var obsShown = []string{"Hi.", "This sentence is a great deal longer than the first one so that its subtitle runs " +
	"across most of the canvas and wraps onto a second line.", "Short again."}

// obsGeometryJS records, in every overlay document, the box of the avatar
// and of each text the overlay shows, at every change of the subtitle
// (and once when the avatar first shows), and the sound the page's audio
// elements play: each element is routed, as it starts, through a
// recorder on an AudioContext that counts its blocks of 256 samples with
// sound in them (the page's own audio path, as OBS captures it).
const obsGeometryJS = `window.koeGeo = {boxes: [], sound: []};
(() => {
	let ctx = null, rec = null, cur = null;
	const play = HTMLMediaElement.prototype.play;
	HTMLMediaElement.prototype.play = function () {
		if (!ctx) {
			ctx = new AudioContext();
			rec = ctx.createScriptProcessor(256, 1, 1);
			rec.onaudioprocess = (e) => {
				if (!cur) return;
				const d = e.inputBuffer.getChannelData(0);
				let peak = 0;
				for (let i = 0; i < d.length; i++) peak = Math.max(peak, Math.abs(d[i]));
				if (peak > 0.01) cur.loud++;
			};
			rec.connect(ctx.destination);
			koeGeo.ctx = () => ctx.state;
		}
		if (!this.koeRouted) {
			this.koeRouted = true;
			ctx.createMediaElementSource(this).connect(rec);
			const s = {loud: 0, ended: false};
			koeGeo.sound.push(s);
			this.addEventListener("playing", () => { cur = s; });
			this.addEventListener("ended", () => { s.ended = true; });
		}
		return play.call(this);
	};
})();
document.addEventListener("DOMContentLoaded", () => {
	const rect = (id) => { const el = document.getElementById(id); if (!el) return null; const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
	const sub = document.getElementById("subtitle"), img = document.getElementById("avatar");
	const note = () => koeGeo.boxes.push({text: sub.textContent, avatar: rect("avatar"), shown: !img.hidden});
	new MutationObserver(note).observe(sub, {childList: true, characterData: true, subtree: true});
	img.addEventListener("load", note);
});`

type obsBox struct {
	Text   string     `json:"text"`
	Avatar [4]float64 `json:"avatar"`
	Shown  bool       `json:"shown"`
}

// openOBSOverlay opens an overlay tab as an OBS browser source of 1920 ×
// 1080 shows it: that size exactly, at scale 1, over a transparent
// background.
func openOBSOverlay(t *testing.T, browser *cdp.Browser) *overlayPage {
	t.Helper()
	p := openOverlay(t, browser)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := p.p.AddInitScript(ctx, obsGeometryJS); err != nil {
		t.Fatal(err)
	}
	if err := p.p.Call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1920, "height": 1080, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.p.Call(ctx, "Emulation.setDefaultBackgroundColorOverride", map[string]any{"color": map[string]any{"r": 0, "g": 0, "b": 0, "a": 0}}, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOverlayOBSCanvas: two overlays at 1920 × 1080 (the avatar beside
// the subtitle at the bottom, and above it at the left) follow a reply
// of a short, a long and a short sentence with audio=1. The avatar's box
// is the same at every subtitle, and the same as before the reply; the
// subtitles are the sentences without their marks; every pixel away
// from the avatar and the texts is fully transparent; and every piece's
// sound went through the page's audio path.
func TestOverlayOBSCanvas(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 1920, Height: 1080, MuteAudio: true, AutoplayPolicy: "no-user-gesture-required",
		Args: []string{"--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"}})
	llm := koetest.StartLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(obsReply)}))
	cfg := overlayConfig(t, llm)
	cfg.Conversation.FasterFirstResponse = false
	koe := koetest.StartKoe(t, cfg)

	// One at a time: a tab that is not in front (hidden) does not start
	// its media, while an OBS source is always shown.
	sp := dialSpeaker(t, koe.Addr())
	for _, pos := range []string{"bottom", "left"} {
		p := openOBSOverlay(t, browser)
		p.navigate("http://" + koe.Addr() + "/overlay?conf=" + cfg.Character.ConfUID + "&token=" + overlayToken +
			"&audio=1&fade=600&blink=3600&position=" + pos)
		p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.view !== null && koeGeo.boxes.some((b) => b.shown)`)
		if got := p.str(`innerWidth + "x" + innerHeight + " " + document.visibilityState`); got != "1920x1080 visible" {
			t.Fatalf("the overlay's viewport is %s, want OBS's 1920x1080, visible", got)
		}
		pieces := sp.turn("speak")
		if len(pieces) != len(obsShown) {
			t.Fatalf("the reply came in %d pieces, want %d: %+v", len(pieces), len(obsShown), pieces)
		}
		// The long subtitle, up while its piece plays: the screenshot.
		p.waitFor(`document.getElementById("subtitle").textContent.includes("longer")`)
		p.expectOnlyInk(pos)
		p.waitFor(fmt.Sprintf(`koeOverlay.played.length === %d && koeOverlay.pending() === 0`, len(pieces)))
		p.expectAvatarStill(pos, obsShown)

		var sound []struct {
			Loud  int  `json:"loud"`
			Ended bool `json:"ended"`
		}
		p.eval(`koeGeo.sound`, &sound)
		if len(sound) != len(pieces) {
			p.fail(fmt.Errorf("position=%s: %d audio elements played, want one per piece (%d)", pos, len(sound), len(pieces)))
		}
		for j, s := range sound {
			if s.Loud == 0 || !s.Ended {
				p.fail(fmt.Errorf("position=%s: piece %d played %d blocks with sound (ended %v); want its tone heard to the end", pos, j, s.Loud, s.Ended))
			}
		}
		if err := p.p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// expectAvatarStill checks that the avatar's box was the same at every
// subtitle and before the first, and that the subtitles shown were want.
func (o *overlayPage) expectAvatarStill(name string, want []string) {
	o.t.Helper()
	var boxes []obsBox
	o.eval(`koeGeo.boxes`, &boxes)
	var first *obsBox
	var texts, moved []string
	for j := range boxes {
		b := &boxes[j]
		if !b.Shown {
			continue
		}
		if first == nil {
			first = b
		}
		if b.Avatar != first.Avatar {
			if m := fmt.Sprintf("%.0f with %.20q", b.Avatar[0], b.Text); len(moved) == 0 || moved[len(moved)-1] != m {
				moved = append(moved, m)
			}
		}
		if t := strings.TrimSpace(b.Text); t != "" && (len(texts) == 0 || texts[len(texts)-1] != t) {
			texts = append(texts, t)
		}
	}
	if len(moved) > 0 {
		o.fail(fmt.Errorf("%s: the avatar's box %v (left edge %.0f with subtitle %q) moved: left edge %q", name, first.Avatar, first.Avatar[0], first.Text, moved))
	}
	if fmt.Sprint(texts) != fmt.Sprint(want) {
		o.fail(fmt.Errorf("%s: subtitles %q, want %q", name, texts, want))
	}
}

// expectOnlyInk screenshots the overlay and checks that every pixel with
// any alpha lies within the avatar's or a text's box (a few pixels more
// for the text's outline), and that the avatar and the subtitle are
// drawn.
func (o *overlayPage) expectOnlyInk(name string) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	const boxesJS = `(() => { const r = (id) => { const el = document.getElementById(id); if (!el || el.hidden || el.textContent === "" && el.tagName !== "IMG") return null;
		const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
		return [r("avatar"), r("name"), r("subtitle"), r("viewers")].filter((b) => b !== null); })()`
	var before, after [][4]float64
	o.eval(boxesJS, &before)
	shot, err := o.p.Screenshot(ctx)
	if err != nil {
		o.fail(err)
	}
	o.eval(boxesJS, &after)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		o.fail(fmt.Errorf("the overlay changed while its screenshot was taken: %v, then %v", before, after))
	}
	if dir := os.Getenv("KOE_SCREENSHOTS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "overlay-obs-"+name+".png"), shot, 0o644)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		o.fail(err)
	}
	if b := img.Bounds(); b.Dx() != 1920 || b.Dy() != 1080 {
		o.fail(fmt.Errorf("the screenshot is %v, want 1920x1080", b))
	}
	const outline = 4 // the text's outline and antialiasing
	inside := func(x, y int) bool {
		for _, r := range after {
			if float64(x) >= r[0]-outline && float64(x) < r[2]+outline && float64(y) >= r[1]-outline && float64(y) < r[3]+outline {
				return true
			}
		}
		return false
	}
	inked := make([]int, len(after))
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			_, _, _, a := img.At(x, y).RGBA()
			if a == 0 {
				continue
			}
			if !inside(x, y) {
				o.fail(fmt.Errorf("%s: pixel (%d,%d) has alpha %d outside the avatar and the texts %v", name, x, y, a>>8, after))
			}
			for i, r := range after {
				if float64(x) >= r[0] && float64(x) < r[2] && float64(y) >= r[1] && float64(y) < r[3] {
					inked[i]++
				}
			}
		}
	}
	for i, n := range inked {
		if n < 50 {
			o.fail(fmt.Errorf("%s: box %v has %d visible pixels", name, after[i], n))
		}
	}
}
