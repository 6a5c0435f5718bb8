package static_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"koe/protocol"
	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// sceneOverlayLines are what each character says, line by line.
var sceneOverlayLines = map[string][]string{
	"Koe": {"Cats are the best. They purr.", "Dogs are loud."},
	"Mio": {"I prefer dogs. They play fetch.", "Dogs are loyal."},
}

// TestOverlayScene drives /overlay?scene= in headless Chromium: a scene of
// two characters shows both avatars, each line's subtitles appear under
// the character who says it, in the order said, the speaker highlighted;
// a stop clears the line being said at once.
func TestOverlayScene(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 1280, Height: 720, MuteAudio: true,
		Args: []string{"--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"}})
	var mu sync.Mutex
	said := map[string]int{}
	open, open2 := make(chan struct{}), make(chan struct{})
	var release, release2 sync.Once
	t.Cleanup(func() { release.Do(func() { close(open) }); release2.Do(func() { close(open2) }) })
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		words := r.UserWords()
		if strings.HasPrefix(words, "[Turn ") {
			return fakellm.Reply{Tokens: fakellm.Words("A summary.")}
		}
		name := "Koe"
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "PERSONA-MIO") {
				name = "Mio"
			}
		}
		mu.Lock()
		n := said[name]
		said[name]++
		mu.Unlock()
		reply := fakellm.Reply{}
		if lines := sceneOverlayLines[name]; n < len(lines) {
			reply.Tokens = fakellm.Words(lines[n])
		} else {
			reply.Tokens = fakellm.Words("This goes on. " + strings.Repeat("And on and on we go. ", 300))
		}
		// A scene's first line waits until the overlay watches.
		for topic, gate := range map[string]chan struct{}{"Today's topic: cats": open, "Today's topic: birds": open2} {
			if strings.Contains(words, topic) {
				reply.BeforeChunk = func(i int) {
					if i == 0 {
						<-gate
					}
				}
			}
		}
		return reply
	})
	cfg := overlayConfig(t, llm)
	cfg.Character.Persona = "You are Koe. PERSONA-KOE"
	if err := os.MkdirAll(cfg.CharactersDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mio := "conf_name: mio\nconf_uid: mio\ncharacter_name: Mio\npersona_prompt: You are Mio. PERSONA-MIO\n" +
		"overlay:\n  avatar:\n    idle: joy.png\n    talking: joy-talk.png\n    blink: \"\"\n    emotions: {}\n    emotions_talking: {}\n"
	if err := os.WriteFile(filepath.Join(cfg.CharactersDir, "mio.yaml"), []byte(mio), 0o644); err != nil {
		t.Fatal(err)
	}
	koe := koetest.StartKoe(t, cfg)
	scene := startOverlayScene(t, koe.Addr(), protocol.SceneRequest{Characters: []string{"default", "mio"}, Topic: "cats or dogs", MaxRounds: 3})

	p := openOverlay(t, browser)
	p.navigate("http://" + koe.Addr() + "/overlay?scene=" + scene.ID + "&token=" + overlayToken + "&fade=3600&blink=3600")
	p.waitFor(`koeOverlay.connection === "connected" && document.querySelectorAll("#scene .member").length === 2`)
	// Both avatars, each its own character's idle picture.
	p.waitFor(`[...document.querySelectorAll("#scene .member .avatar")].map((i) => i.getAttribute("src")).join(" ") === "/avatars/idle.png /avatars/joy.png"`)
	if !p.bool(`getComputedStyle(document.getElementById("stage")).display === "none"`) {
		t.Error("the single character's stage shows in a scene")
	}
	// Each member's subtitles as they appear, with whether its box is the
	// one highlighted then.
	p.eval(`(() => {
		window.sceneSubs = [];
		for (const box of document.querySelectorAll("#scene .member")) {
			const sub = box.querySelector(".subtitle");
			new MutationObserver(() => {
				if (sub.textContent !== "") sceneSubs.push({conf: box.dataset.conf, text: sub.textContent, speaking: box.classList.contains("speaking"),
					others: [...document.querySelectorAll("#scene .member.speaking")].length});
			}).observe(sub, {childList: true, characterData: true, subtree: true});
		}
		return true;
	})()`, new(bool))
	release.Do(func() { close(open) })

	// Two rounds' lines, each sentence under its speaker, in order.
	var want []sceneSub
	for round := range 2 {
		for _, who := range []struct{ conf, name string }{{"koe_default", "Koe"}, {"mio", "Mio"}} {
			for _, s := range splitSentences(sceneOverlayLines[who.name][round]) {
				want = append(want, sceneSub{Conf: who.conf, Text: s, Speaking: true, Others: 1})
			}
		}
	}
	p.waitFor(fmt.Sprintf(`sceneSubs.length >= %d`, len(want)))
	var got []sceneSub
	p.eval(`sceneSubs`, &got)
	if fmt.Sprint(got[:len(want)]) != fmt.Sprint(want) {
		t.Fatalf("subtitles:\n got %+v\nwant %+v", got[:len(want)], want)
	}
	// The third round's first line is long: a stop clears it at once.
	p.waitFor(`sceneSubs.some((s) => s.text === "This goes on.")`)
	if a := overlaySceneCall(t, koe.Addr(), http.MethodPost, "/api/scenes/"+scene.ID+"/stop", nil); a.status != 200 {
		t.Fatalf("stop: %d %s", a.status, a.body)
	}
	p.waitFor(`koeOverlay.pending() === 0 && document.querySelector('#scene .member[data-conf="koe_default"] .subtitle').textContent === "" && koeOverlay.speaking === ""`)
	if n := p.int(`document.querySelectorAll("#scene .member.speaking").length`); n != 0 {
		t.Errorf("%d members highlighted after the stop", n)
	}

	// ?scene=current follows whichever scene runs: none now, then the
	// next one started.
	q := openOverlay(t, browser)
	q.navigate("http://" + koe.Addr() + "/overlay?scene=current&fade=3600&blink=3600")
	q.waitFor(`document.readyState === "complete" && koeOverlay.scene === null`)
	next := startOverlayScene(t, koe.Addr(), protocol.SceneRequest{Characters: []string{"mio", "default"}, Topic: "birds", MaxRounds: 1})
	q.waitFor(fmt.Sprintf(`koeOverlay.scene !== null && koeOverlay.scene.id === %q && koeOverlay.connection === "connected"`, next.ID))
	if got := q.str(`[...document.querySelectorAll("#scene .member")].map((b) => b.dataset.conf).join(" ")`); got != "mio koe_default" {
		t.Errorf("the next scene's characters on the page: %q", got)
	}
	release2.Do(func() { close(open2) })
	q.waitFor(`document.querySelector('#scene .member[data-conf="mio"] .subtitle').textContent === "This goes on." && koeOverlay.speaking === "mio"`)
	overlaySceneCall(t, koe.Addr(), http.MethodPost, "/api/scenes/"+next.ID+"/stop", nil)
	q.waitFor(`koeOverlay.pending() === 0 && koeOverlay.speaking === ""`)
}

type sceneSub struct {
	Conf     string `json:"conf"`
	Text     string `json:"text"`
	Speaking bool   `json:"speaking"`
	Others   int    `json:"others"`
}

// splitSentences cuts a line as koe cuts a reply into pieces: at each
// sentence's end.
func splitSentences(s string) []string {
	var out []string
	for _, part := range strings.SplitAfter(s, ".") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

type overlaySceneAnswer struct {
	status int
	body   []byte
}

func overlaySceneCall(t *testing.T, addr, method, path string, body any) overlaySceneAnswer {
	t.Helper()
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+overlayToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return overlaySceneAnswer{resp.StatusCode, b.Bytes()}
}

func startOverlayScene(t *testing.T, addr string, req protocol.SceneRequest) protocol.SceneInfo {
	t.Helper()
	a := overlaySceneCall(t, addr, http.MethodPost, "/api/scenes", req)
	if a.status != http.StatusCreated {
		t.Fatalf("start the scene: %d %s", a.status, a.body)
	}
	var in protocol.SceneInfo
	if err := json.Unmarshal(a.body, &in); err != nil {
		t.Fatal(err)
	}
	return in
}
