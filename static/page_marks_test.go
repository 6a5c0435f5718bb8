package static_test

import (
	"strings"
	"testing"

	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// TestChatPageHidesMarks: koe's page shows a reply without the marks it
// carries for koe (an emotion keyword, citation marks), as it streams
// and when its history is opened again; the wire and the store keep them.
func TestChatPageHidesMarks(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700, MuteAudio: true})
	const reply = "[joy] Hi there [1]. All good [2, 3]."
	const want = "Hi there. All good."
	llm := koetest.StartLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(reply)}))
	koe := koetest.StartKoe(t, testConfig(t, t.TempDir(), llm))

	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.eval(`window.koeShown = [];
		new MutationObserver(() => {
			const ai = document.querySelectorAll("#log .msg.ai");
			if (ai.length) koeShown.push(ai[ai.length - 1].textContent);
		}).observe(document.getElementById("log"), {subtree: true, childList: true, characterData: true})`, nil)
	p.say("hello")
	p.waitFor(`document.getElementById("stop").disabled && document.querySelectorAll("#log .msg.ai").length === 1`)
	p.expectBubbles(bubble{"human", "hello", false}, bubble{"ai", want, false})
	var shown []string
	p.eval(`koeShown`, &shown)
	for _, s := range shown {
		for _, bad := range []string{"[", "joy"} {
			if strings.Contains(s, bad) {
				t.Fatalf("while streaming the bubble showed %q", s)
			}
		}
	}

	// Opened again from the list: the stored reply, marks and all,
	// shown without them.
	p.waitFor(`document.getElementById("histories").options.length === 2`)
	p.eval(`(() => { const h = document.getElementById("histories"); h.value = h.options[1].value; h.dispatchEvent(new Event("change")); })()`, nil)
	p.waitFor(`koeWire.in.some((f) => f.Type === "history-data")`)
	p.expectBubbles(bubble{"human", "hello", false}, bubble{"ai", want, false})
}
