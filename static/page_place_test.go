package static_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// placeOther is the second character of these tests: its own names on
// the bubbles.
const placeOther = "conf_name: other\nconf_uid: other_char\ncharacter_name: Mika\nhuman_name: Ada\n"

// placeView is what the page shows of where it is.
type placeView struct {
	Title, Character, History string
	Names                     []string // each bubble's speaker label
	Notice                    string   // the notice, if shown
}

const placeViewJS = `({Title: document.title, Character: characters.value, History: histories.value,
	Names: [...document.querySelectorAll("#log .msg")].map((b) => { const w = b.querySelector(".who"); return w ? w.textContent : ""; }),
	Notice: notice.hidden ? "" : notice.textContent})`

func (p *pageT) place() placeView {
	p.t.Helper()
	var v placeView
	p.eval(placeViewJS, &v)
	return v
}

// placeDeleteHistory deletes a history of character file as another
// client of koe would: over its own WebSocket.
func placeDeleteHistory(t *testing.T, addr, file, uid string) {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/client-ws", nil)
	if err != nil {
		t.Fatalf("dial koe: %v", err)
	}
	_ = resp.Body.Close()
	defer ws.Close()
	until := func(typ string) map[string]any {
		t.Helper()
		for {
			_ = ws.SetReadDeadline(time.Now().Add(guard))
			var m map[string]any
			if err := ws.ReadJSON(&m); err != nil {
				t.Fatalf("waiting for %s: %v", typ, err)
			}
			if m["type"] == "error" {
				t.Fatalf("waiting for %s: %v", typ, m["message"])
			}
			if m["type"] == typ {
				return m
			}
		}
	}
	for _, step := range []struct {
		msg  map[string]any
		want string
	}{
		{map[string]any{"type": "switch-config", "file": file}, "config-switched"},
		{map[string]any{"type": "delete-history", "history_uid": uid}, "history-deleted"},
	} {
		if err := ws.WriteJSON(step.msg); err != nil {
			t.Fatal(err)
		}
		if m := until(step.want); step.want == "history-deleted" && m["success"] != true {
			t.Fatalf("history %s was not deleted: %v", uid, m)
		}
	}
}

// TestChatPageKeepsPlace: a reload of koe's page goes on with the
// character and the conversation it had open, its bubbles named by who
// said them and its list naming conversations by their first words; when
// the conversation or the character has gone meanwhile, the page says so
// and goes on in a new conversation.
func TestChatPageKeepsPlace(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 1000, Height: 720, MuteAudio: true})
	users := &reconnectUsers{}
	echo := fakellm.Echo(5 * time.Millisecond)
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		if r.Stream {
			users.add(r)
		}
		return echo(r)
	})
	cfg := testConfig(t, t.TempDir(), llm)
	if err := os.MkdirAll(cfg.CharactersDir, 0o755); err != nil {
		t.Fatal(err)
	}
	otherFile := filepath.Join(cfg.CharactersDir, "other.yaml")
	if err := os.WriteFile(otherFile, []byte(placeOther), 0o644); err != nil {
		t.Fatal(err)
	}
	koe := koetest.StartKoe(t, cfg)

	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected" && document.title === "koe · koe"`)
	p.click("#mute") // a turn ends as soon as its text is in

	// The default character's names: koe's defaults.
	m := p.mark()
	p.say("Good morning")
	p.waitTurn(m)
	if v := p.place(); strings.Join(v.Names, ",") != "Human,Koe" {
		t.Fatalf("the bubbles are named %q, want Human and Koe", v.Names)
	}

	// Another character, two turns: the bubbles carry its names, and the
	// list names the conversation by its first words.
	p.waitFor(`characters.options.length === 2`)
	p.eval(`characters.value = "other.yaml"; characters.dispatchEvent(new Event("change"))`, nil)
	p.waitFor(`document.title === "koe · other"`)
	first := "Tell me about the lighthouse keeper who counted every wave of the sea"
	for _, said := range []string{first, "and then?"} {
		m := p.mark()
		p.say(said)
		p.waitTurn(m)
	}
	p.expectBubbles(bubble{"human", first, false}, bubble{"ai", "You said: " + first + ".", false},
		bubble{"human", "and then?", false}, bubble{"ai", "You said: and then?.", false})
	title := "Tell me about the lighthouse keeper who counted…"
	p.waitFor(`histories.options.length === 2 && histories.options[1].text.startsWith(` + jsString(title+" · ") + `)`)
	var uid string
	p.eval(`koeDebug.session.history`, &uid)
	want := placeView{Title: "koe · other", Character: "other.yaml", History: uid, Names: []string{"Ada", "Mika", "Ada", "Mika"}}
	if v := p.place(); fmt.Sprint(v) != fmt.Sprint(want) {
		t.Fatalf("before the reload the page shows %+v, want %+v", v, want)
	}

	// A reload: the same character, the same conversation, chosen in the
	// list, named as before; the next turn goes on in it.
	p.reload()
	p.waitFor(`document.getElementById("status").textContent === "connected" && koeDebug.restored.length === 1`)
	p.waitFor(`document.title === "koe · other" && document.querySelectorAll("#log .msg").length === 4 && histories.value !== ""`)
	if v := p.place(); fmt.Sprint(v) != fmt.Sprint(want) {
		t.Fatalf("after a reload the page shows %+v, want %+v", v, want)
	}
	p.expectBubbles(bubble{"human", first, false}, bubble{"ai", "You said: " + first + ".", false},
		bubble{"human", "and then?", false}, bubble{"ai", "You said: and then?.", false})
	m = p.mark()
	p.say("still there?")
	p.waitTurn(m)
	if got := users.last(); got != first+" | and then? | still there?" {
		t.Fatalf("the turn after the reload was answered knowing the user said %q, want the whole conversation", got)
	}
	p.waitFor(`histories.options.length === 2 && histories.value === ` + jsString(uid))

	// The conversation is deleted elsewhere: a reload says so and begins
	// a new one, with the same character.
	placeDeleteHistory(t, koe.Addr(), "other.yaml", uid)
	p.reload()
	p.waitFor(`koeDebug.restored.length === 1 && !koeDebug.restored[0].ok && !koeDebug.session.restoring`)
	v := p.place()
	if v.Title != "koe · other" || v.Character != "other.yaml" || v.History != "" || len(v.Names) != 0 ||
		!strings.Contains(v.Notice, "could not be reopened") {
		t.Fatalf("after a reload into a deleted conversation the page shows %+v", v)
	}
	m = p.mark()
	p.say("hello again")
	p.waitTurn(m)
	if got := users.last(); got != "hello again" {
		t.Fatalf("the new conversation's turn was answered knowing the user said %q", got)
	}
	p.waitFor(`histories.options.length === 2 && histories.options[1].text.startsWith("hello again · ")`)

	// The character file is removed: a reload says so and goes on with
	// koe's default character, in a new conversation; nothing lands in the
	// chat as an error.
	if err := os.Remove(otherFile); err != nil {
		t.Fatal(err)
	}
	p.reload()
	p.waitFor(`koeDebug.restored.length === 1 && !koeDebug.session.restoring && document.title === "koe · koe"`)
	v = p.place()
	if v.History != "" || len(v.Names) != 0 || !strings.Contains(v.Notice, "could not be loaded again") {
		t.Fatalf("after a reload into a removed character the page shows %+v", v)
	}
	m = p.mark()
	p.say("who are you now?")
	p.waitTurn(m)
	if v := p.place(); strings.Join(v.Names, ",") != "Human,Koe" {
		t.Fatalf("the default character's bubbles are named %q", v.Names)
	}
	p.screenshot("place.png")
}

// TestChatPageDocumentsInReach: the documents panel opens from above the
// message box, and its file picker is on the screen, with nothing to
// scroll, on a laptop's window and on a phone.
func TestChatPageDocumentsInReach(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 1280, Height: 720, MuteAudio: true})
	llm := koetest.StartLLM(t, fakellm.Echo(5*time.Millisecond))
	koe := koetest.StartKoe(t, testConfig(t, t.TempDir(), llm))
	p := openPage(t, browser)
	for _, size := range []struct {
		name          string
		width, height int
		mobile        bool
	}{
		{"laptop", 1280, 720, false},
		{"phone", 390, 844, true},
	} {
		ctx, cancel := p.ctx()
		err := p.p.Call(ctx, "Emulation.setDeviceMetricsOverride",
			map[string]any{"width": size.width, "height": size.height, "deviceScaleFactor": 1, "mobile": size.mobile}, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		p.navigate("http://" + koe.Addr() + "/")
		p.waitFor(`document.getElementById("status").textContent === "connected"`)
		// A conversation long enough to scroll.
		for i := range 8 {
			m := p.mark()
			p.eval(fmt.Sprintf(`text.value = "line %d of a long chat"; document.getElementById("form").requestSubmit()`, i), nil)
			p.waitTurn(m)
		}
		var got struct {
			Open                      struct{ Top, Bottom, Left, Right float64 }
			Picker                    struct{ Top, Bottom, Left, Right float64 }
			FormTop, Width, Height    float64
			ScrollHeight, ScrollWidth float64
			Hit                       bool
		}
		const layoutJS = `(() => {
			const r = (e) => { const b = e.getBoundingClientRect(); return {Top: b.top, Bottom: b.bottom, Left: b.left, Right: b.right}; };
			const s = document.querySelector("#docs summary"), sb = s.getBoundingClientRect();
			const hit = document.elementFromPoint(sb.left + sb.width / 2, sb.top + sb.height / 2);
			return {Open: r(s), Picker: r(document.getElementById("doc-files")), FormTop: document.getElementById("form").getBoundingClientRect().top,
				Width: innerWidth, Height: innerHeight, ScrollHeight: document.documentElement.scrollHeight,
				ScrollWidth: document.documentElement.scrollWidth, Hit: s.contains(hit)};
		})()`
		p.eval(layoutJS, &got)
		if got.Open.Bottom > got.FormTop || got.Open.Top < 0 || got.Open.Right > got.Width || !got.Hit ||
			got.ScrollHeight > got.Height || got.ScrollWidth > got.Width {
			t.Fatalf("%s: the documents button is not in reach above the message box: %+v", size.name, got)
		}
		p.click("#docs summary")
		p.waitFor(`document.getElementById("docs").open && document.getElementById("doc-summary").textContent === "(none)"`)
		p.eval(layoutJS, &got)
		p.screenshot("documents-" + size.name + ".png")
		if got.Picker.Top < 0 || got.Picker.Bottom > got.Height || got.Picker.Left < 0 || got.Picker.Right > got.Width ||
			got.ScrollHeight > got.Height || got.ScrollWidth > got.Width {
			t.Fatalf("%s: the open documents panel's file picker is off the screen: %+v", size.name, got)
		}
	}
}
