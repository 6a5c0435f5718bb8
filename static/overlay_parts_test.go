package static_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// A sentence streamed in parts plays on the overlay as one subtitle: it
// shows when the first part starts and stays up through the later parts,
// which carry no display text.
func TestOverlaySentenceInParts(t *testing.T) {
	testkit.External(t, "Chromium")
	browser := launchStreamBrowser(t)
	const sentence = "This one sentence is streamed to the overlay in several parts"
	llm := koetest.StartLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(sentence + ".")}))
	cfg := overlayConfig(t, llm)
	llm.SetSpeech(fakellm.RealisticSpeech)
	cfg.Character.TTS.StreamFirstMillis = 250
	cfg.Character.TTS.StreamPieceMillis = 1000
	cfg.Conversation.FasterFirstResponse = false
	koe := koetest.StartKoe(t, cfg)

	p := openStreamOverlay(t, browser)
	p.navigate("http://" + koe.Addr() + "/overlay?conf=" + cfg.Character.ConfUID + "&token=" + overlayToken + "&audio=1&fade=0.3&blink=3600")
	p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.view !== null`)

	s := dialSpeaker(t, koe.Addr())
	defer s.close()
	pieces := s.turn("speak in parts")
	if len(pieces) < 3 || pieces[0].Text != sentence+"." || slices.ContainsFunc(pieces[1:], func(p piece) bool { return p.Text != "" }) {
		t.Fatalf("the speaker got %+v", pieces)
	}
	p.waitFor(`koeOverlay.played.length === ` + strconv.Itoa(len(pieces)) + ` && koeOverlay.pending() === 0`)
	var texts []string
	for _, sub := range p.streamSubs(0) {
		texts = append(texts, strings.TrimSpace(sub.Text))
	}
	if !slices.Equal(texts, []string{sentence + "."}) {
		t.Fatalf("the subtitle went %q over %d parts; want the sentence once, kept up", texts, len(pieces))
	}
}
