package static_test

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// pageReconnect is a reconnect the page recorded (koeDebug.reconnects).
type pageReconnect struct {
	Code  int
	Delay float64
}

// reconnectUsers lists, for each LLM request of the test, the user's
// words of every user message it carried: what koe knew of the
// conversation when it answered.
type reconnectUsers struct {
	mu   sync.Mutex
	seen [][]string
}

func (u *reconnectUsers) add(r fakellm.Request) {
	var said []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			said = append(said, fakellm.Request{Messages: []fakellm.Message{m}}.UserWords())
		}
	}
	u.mu.Lock()
	u.seen = append(u.seen, said)
	u.mu.Unlock()
}

func (u *reconnectUsers) last() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return strings.Join(u.seen[len(u.seen)-1], " | ")
}

// TestChatPageReconnects: the connection to koe is lost mid-conversation,
// as in a rolling restart behind a load balancer. The page reconnects (at
// once on koe's 1012 "service restart", after a delay on any other close),
// reopens the same conversation with the same client_uid, and the next
// message goes on in it; a message typed while disconnected waits, shown
// as waiting, and is sent once the conversation is back.
func TestChatPageReconnects(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700, MuteAudio: true})
	users := &reconnectUsers{}
	echo := fakellm.Echo(10 * time.Millisecond)
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		if !r.Stream {
			return fakellm.Reply{Tokens: []string{"They talked."}}
		}
		users.add(r)
		if lastUser(r) == slowPrompt {
			return fakellm.Reply{Tokens: fakellm.Words(strings.Repeat(slowSentence, 5000)), Interval: 5 * time.Millisecond}
		}
		return echo(r)
	})
	koe := koetest.StartKoe(t, testConfig(t, t.TempDir(), llm))
	front := startWSFront(t, koe.Addr())

	p := openPage(t, browser)
	p.navigate("http://" + front.addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.say("Hello koe")
	want1 := "You said: Hello koe."
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 2 && b[1].Text === ` + jsString(want1) + ` })()`)
	p.waitFor(`document.getElementById("stop").disabled && koeDebug.session.history !== ""`)
	var first struct{ History, ClientUID string }
	p.eval(`({History: koeDebug.session.history, ClientUID: koeDebug.session.clientUID})`, &first)
	if first.ClientUID == "" {
		t.Fatal("the page did not learn its client_uid")
	}

	// koe restarts: 1012, and the page is back at once, in the same
	// conversation.
	front.restart()
	p.waitFor(`koeDebug.restored.length === 1`)
	var reconnects []pageReconnect
	p.eval(`koeDebug.reconnects`, &reconnects)
	if len(reconnects) != 1 || reconnects[0].Code != 1012 || reconnects[0].Delay != 0 {
		t.Fatalf("reconnects %+v, want one at once after 1012", reconnects)
	}
	var restored []struct {
		History string
		OK      bool
	}
	p.eval(`koeDebug.restored`, &restored)
	if restored[0].History != first.History || !restored[0].OK {
		t.Fatalf("restored %+v, want history %s", restored, first.History)
	}
	queries := front.waitConnections(2)
	if q, _ := url.ParseQuery(queries[1]); q.Get("client_uid") != first.ClientUID {
		t.Errorf("the page reconnected with %q, want client_uid=%s", queries[1], first.ClientUID)
	}
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.expectBubbles(bubble{"human", "Hello koe", false}, bubble{"ai", want1, false})
	p.say("are you there?")
	want2 := "You said: are you there?."
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 4 && b[3].Text === ` + jsString(want2) + ` })()`)
	if got := users.last(); got != "Hello koe | are you there?" {
		t.Fatalf("koe answered the turn after the restart knowing the user said %q, want the whole conversation", got)
	}
	p.waitFor(`document.getElementById("stop").disabled`)

	// The connection breaks (no close frame) and no koe answers for a
	// while: the page waits before trying again, and what is typed
	// meanwhile waits too, shown as waiting.
	front.hold()
	front.drop()
	p.waitFor(`koeDebug.reconnects.length === 2 && document.getElementById("status").textContent !== "connected"`)
	p.eval(`koeDebug.reconnects`, &reconnects)
	if reconnects[1].Code == 1012 || reconnects[1].Delay <= 0 {
		t.Fatalf("reconnect after a broken connection: %+v, want a delay", reconnects[1])
	}
	front.waitConnections(3) // the page is trying again, held at the front
	p.say("did you miss me?")
	p.waitFor(`document.getElementById("text").value === ""`)
	p.expectBubbles(bubble{"human", "Hello koe", false}, bubble{"ai", want1, false},
		bubble{"human", "are you there?", false}, bubble{"ai", want2, false},
		bubble{"human queued", "did you miss me?", false})
	p.screenshot("reconnect-waiting.png")
	front.release()
	want3 := "You said: did you miss me?."
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 6 && b[5].Text === ` + jsString(want3) + ` })()`)
	p.expectBubbles(bubble{"human", "Hello koe", false}, bubble{"ai", want1, false},
		bubble{"human", "are you there?", false}, bubble{"ai", want2, false},
		bubble{"human", "did you miss me?", false}, bubble{"ai", want3, false})
	if got := users.last(); got != "Hello koe | are you there? | did you miss me?" {
		t.Fatalf("the waiting message was answered knowing the user said %q, want the whole conversation", got)
	}
	p.waitFor(`document.getElementById("stop").disabled`)

	// koe restarts mid-reply: the reply is cut where koe stopped it, the
	// page shows the conversation as koe stored it, and goes on in it.
	p.say(slowPrompt)
	p.waitFor(`(() => { const b = ` + bubblesJS + `; return b.length === 8 && b[7].Text.length > 0 })()`)
	front.restart()
	p.waitFor(`koeDebug.restored.length === 3`)
	// koe keeps of a cut reply what was heard of it: nothing when no
	// piece had played yet.
	var after []bubble
	p.eval(bubblesJS, &after)
	before := []bubble{{"human", "Hello koe", false}, {"ai", want1, false},
		{"human", "are you there?", false}, {"ai", want2, false},
		{"human", "did you miss me?", false}, {"ai", want3, false}, {"human", slowPrompt, false}}
	if len(after) == 8 {
		if after[7].Kind != "ai" || !after[7].Interrupted {
			t.Fatalf("the cut reply came back as %+.80v, want it marked interrupted", after[7])
		}
		before = append(before, after[7])
	}
	p.expectBubbles(before...)
	p.say("sorry, go on")
	want4 := "You said: sorry, go on."
	p.waitFor(fmt.Sprintf(`(() => { const b = `+bubblesJS+`; return b.length === %d && b[b.length - 1].Text === `+jsString(want4)+` })()`, len(before)+2))
	// (The long cut reply may push the first turns out of the LLM's
	// context; the page showed them from koe's stored history above.)
	if got := users.last(); !strings.HasSuffix(got, slowPrompt+" | sorry, go on") {
		t.Fatalf("the turn after a restart mid-reply was answered knowing the user said %q", got)
	}
	// One conversation all along: the list has it and "new conversation".
	p.waitFor(`document.getElementById("stop").disabled`)
	p.waitFor(`histories.options.length === 2 && histories.options[1].value === ` + jsString(first.History))
	p.eval(`koeDebug.reconnects`, &reconnects)
	if len(reconnects) != 3 || reconnects[2] != (pageReconnect{Code: 1012}) {
		t.Fatalf("reconnects %+v, want the last at once after 1012", reconnects)
	}
}

// TestOverlayReconnects: the overlay's connection is closed as a
// draining koe closes it (1012) and then broken without a close frame.
// It reconnects at once after the first and after a delay after the
// second, and follows the character again: the next reply is shown.
func TestOverlayReconnects(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 800, Height: 600, MuteAudio: true,
		Args: []string{"--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"}})
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words(overlayReplies[r.UserWords()])}
	})
	cfg := overlayConfig(t, llm)
	koe := koetest.StartKoe(t, cfg)
	front := startWSFront(t, koe.Addr())
	sp := dialSpeaker(t, koe.Addr())

	p := openOverlay(t, browser)
	p.navigate("http://" + front.addr() + "/overlay?conf=" + cfg.Character.ConfUID + "&token=" + overlayToken + "&fade=100&blink=3600")
	p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.connects === 1`)

	played := 0
	follows := func(text string) {
		t.Helper()
		pieces := sp.turn(text)
		played += len(pieces)
		p.waitFor(fmt.Sprintf(`koeOverlay.played.length === %d`, played))
		p.expectSubtitles(played-len(pieces), pieces)
	}
	follows("greet")

	front.restart()
	p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.connects === 2`)
	var reconnects []pageReconnect
	p.eval(`koeOverlay.reconnects`, &reconnects)
	if len(reconnects) != 1 || reconnects[0] != (pageReconnect{Code: 1012}) {
		t.Fatalf("reconnects %+v, want one at once after 1012", reconnects)
	}
	follows("again")

	front.drop()
	p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.connects === 3`)
	p.eval(`koeOverlay.reconnects`, &reconnects)
	if len(reconnects) != 2 || reconnects[1].Code == 1012 || reconnects[1].Delay <= 0 {
		t.Fatalf("reconnects %+v, want the second after a delay", reconnects)
	}
	follows("quiet")
}
