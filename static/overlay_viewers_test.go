package static_test

import (
	"strconv"
	"testing"
)

// TestOverlayNamesViewers: a live chat turn's conversation-chain-start
// names the viewers it answers, and the overlay shows them beside the
// subtitle while the answer plays; a turn of the streamer's own names
// nobody.
func TestOverlayNamesViewers(t *testing.T) {
	l := startOverlayLive(t)
	browser := launchStreamBrowser(t)
	p := openStreamOverlay(t, browser)
	p.navigate("http://" + l.addr + "/overlay?conf=" + l.conf + "&token=" + overlayToken + "&fade=600&blink=3600")
	p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.view !== null`)
	p.eval(`window.koeViewers = []; new MutationObserver(() => koeViewers.push({who: document.getElementById("viewers").textContent, sub: document.getElementById("subtitle").textContent}))
		.observe(document.getElementById("subtitle"), {childList: true, characterData: true, subtree: true})`, nil)

	l.viewer.Send("PRIVMSG #koe :next")
	p.waitFor(`koeStream.subs.some((s) => s.text.includes("next answer")) && koeOverlay.pending() === 0`)
	var shown []struct{ Who, Sub string }
	p.eval(`koeViewers.filter((v) => v.sub !== "")`, &shown)
	if len(shown) == 0 {
		t.Fatal("no subtitle shown")
	}
	for _, s := range shown {
		if s.Who != "→ alice" {
			t.Fatalf("with subtitle %q the overlay named %q, want the viewer answered (→ alice)", s.Sub, s.Who)
		}
	}

	// The streamer's own turn answers no viewer: the line goes.
	sp := dialSpeaker(t, l.addr)
	defer sp.close()
	n := len(shown)
	sp.turn("next")
	p.waitFor(`koeOverlay.pending() === 0 && koeViewers.filter((v) => v.sub !== "").length > ` + strconv.Itoa(n))
	p.eval(`koeViewers.filter((v) => v.sub !== "")`, &shown)
	for _, s := range shown[n:] {
		if s.Who != "" {
			t.Fatalf("the streamer's own turn named %q with subtitle %q", s.Who, s.Sub)
		}
	}
}
