package static_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// olvPlaybackJS plays a reply's audio frames the way the stock OLV web
// client does (its use-audio-task hook): one task at a time, each a new
// Audio element on the frame's data: URL, played once it can play
// through, the next task started when it has ended. Everything the
// elements play also goes into a recorder on the page's AudioContext,
// which notes, for each block of 256 samples, its time on the context's
// clock and whether it was silent: the played timeline, joins included.
const olvPlaybackJS = `(() => {
	const ctx = new AudioContext();
	const rec = ctx.createScriptProcessor(256, 1, 1);
	const blocks = [];
	rec.onaudioprocess = (e) => {
		const d = e.inputBuffer.getChannelData(0);
		let peak = 0;
		for (let i = 0; i < d.length; i++) peak = Math.max(peak, Math.abs(d[i]));
		blocks.push([e.playbackTime, peak > 0.01]);
	};
	rec.connect(ctx.destination);
	const queue = [], pieces = [];
	let busy = false;
	function next() {
		if (busy || !queue.length) return;
		busy = true;
		const f = queue.shift();
		const el = new Audio("data:audio/wav;base64," + f.audio);
		const src = ctx.createMediaElementSource(el);
		src.connect(rec);
		const p = {text: f.display_text ? f.display_text.text : null, ended: 0};
		pieces.push(p);
		el.addEventListener("canplaythrough", () => el.play(), {once: true});
		el.addEventListener("ended", () => { p.ended = performance.now(); src.disconnect(); busy = false; next(); });
		el.load();
	}
	const ws = new WebSocket("ws://" + location.host + "/client-ws");
	ws.onopen = () => ws.send(JSON.stringify({type: "text-input", text: "sing", images: []}));
	ws.onmessage = (ev) => {
		const m = JSON.parse(ev.data);
		if (m.type === "audio" && m.audio) { queue.push(m); next(); }
	};
	// gaps: the silent stretches (ms) between the first and the last
	// sound played.
	window.olv = {pieces, gaps: () => {
		const out = [];
		let first = blocks.findIndex((b) => b[1]), last = -1;
		for (let i = blocks.length - 1; i >= 0; i--) if (blocks[i][1]) { last = i; break; }
		let quiet = 0;
		for (let i = first; first >= 0 && i <= last; i++) {
			if (!blocks[i][1]) { quiet++; continue; }
			if (quiet) out.push(quiet * 256 / ctx.sampleRate * 1000);
			quiet = 0;
		}
		return out;
	}};
})();`

// TestOLVPlaybackJoins plays streamed sentences through the OLV client's
// playback path in headless Chromium and reports the silences heard at
// the joins between their parts, next to those between whole sentences.
// The reply is one long word per sentence: the fake's tone is then
// continuous within a sentence, so any silence inside one is a join. The
// figures depend on the machine's load: the test logs them (go test -v
// -run TestOLVPlaybackJoins ./static/) and checks only that every part
// played, in order.
func TestOLVPlaybackJoins(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{AutoplayPolicy: "no-user-gesture-required", MuteAudio: true})
	word := "L" + strings.Repeat("a", 60)
	reply := word + ". " + word + ". " + word + "."
	for _, mode := range []struct {
		name  string
		first int
	}{{"whole sentences", 0}, {"streamed in parts", 250}} {
		t.Run(mode.name, func(t *testing.T) {
			llm := koetest.StartLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(reply)}))
			llm.SetSpeech(fakellm.RealisticSpeech)
			cfg := testConfig(t, t.TempDir(), llm)
			cfg.Character.TTS.StreamFirstMillis = mode.first
			cfg.Character.TTS.StreamPieceMillis = 1000
			cfg.Conversation.FasterFirstResponse = false
			web := t.TempDir()
			cfg.Server.WebClientDir = web
			for name, body := range map[string]string{
				"index.html": `<!doctype html><title>olv playback</title><script src="play.js"></script>`,
				"play.js":    olvPlaybackJS,
			} {
				if err := os.WriteFile(filepath.Join(web, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			koe := koetest.StartKoe(t, cfg)

			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			page, err := browser.NewPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer page.Close()
			if err := page.Navigate(ctx, "http://"+koe.Addr()+"/"); err != nil {
				t.Fatal(err)
			}
			// Three sentences of 3.66 s: all parts played.
			if err := page.WaitFor(ctx, `olv.pieces.length > 0 && olv.pieces.every((p) => p.ended > 0) && `+
				`olv.pieces.filter((p) => p.text !== null).length === 3`); err != nil {
				t.Fatal(err)
			}
			var got struct {
				Texts []*string
				Gaps  []float64
			}
			if err := page.Eval(ctx, `({Texts: olv.pieces.map((p) => p.text), Gaps: olv.gaps()})`, &got); err != nil {
				t.Fatal(err)
			}
			if ex := page.Exceptions(); len(ex) > 0 {
				t.Fatalf("the page threw: %q", ex)
			}
			shown := 0
			for _, s := range got.Texts {
				if s != nil {
					shown++
					if strings.TrimSpace(*s) != word+"." {
						t.Errorf("a part shows %q", *s)
					}
				}
			}
			if got.Texts[0] == nil || shown != 3 || (mode.first > 0) != (len(got.Texts) > 3) {
				t.Fatalf("%d parts played, %d with display text", len(got.Texts), shown)
			}
			longest := 0.0
			for _, g := range got.Gaps {
				longest = max(longest, g)
			}
			t.Logf("%s: %d parts played; silences between sound: %.1f ms (longest %.1f ms)", mode.name, len(got.Texts), got.Gaps, longest)
		})
	}
}
