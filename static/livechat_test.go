package static_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/ircdtest"
	"koe/testkit/koetest"
)

// TestOverlayShowsLiveChat: a viewer types in a real IRC channel (ngircd
// standing in for Twitch) and the OBS overlay watching the live character
// shows the answer's subtitles, in order, with the avatar talking.
// withLiveChat turns on cfg's live chat, reading channel #koe of irc.
func withLiveChat(cfg *config.Config, irc *ircdtest.Server) {
	cfg.LiveChat.Enabled = true
	cfg.LiveChat.Twitch.Channel = "koe"
	cfg.LiveChat.Twitch.Server = fmt.Sprintf("127.0.0.1:%d", irc.TLS)
	cfg.LiveChat.Twitch.CAFile = irc.CertFile
	cfg.LiveChat.Twitch.ReconnectMin = 50 * time.Millisecond
}

func TestOverlayShowsLiveChat(t *testing.T) {
	irc := ircdtest.Start(t, "")
	browser := cdp.LaunchTest(t, cdp.Options{Width: 800, Height: 600, MuteAudio: true,
		Args: []string{"--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"}})
	const answer = "Welcome to the stream, Alice. Make yourself at home!"
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		if strings.Contains(r.UserWords(), `viewer alice says: "hi from the chat"`) {
			return fakellm.Reply{Tokens: fakellm.Words(answer)}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Something else.")}
	})
	cfg := overlayConfig(t, llm)
	withLiveChat(&cfg, irc)
	koe := koetest.StartKoe(t, cfg)

	// The overlay, silent (pacing by the pieces' lengths), on the
	// character the live chat speaks as.
	p := openOverlay(t, browser)
	p.navigate("http://" + koe.Addr() + "/overlay?conf=" + cfg.Character.ConfUID + "&token=" + overlayToken + "&fade=600")
	p.waitFor(`koeOverlay.connection === "connected" && koeOverlay.view !== null`)

	alice := ircdtest.NewChatter(t, irc.Plain, "alice", "koe")
	alice.Send("PRIVMSG #koe :hi from the chat")
	// (The first piece may be cut at a comma: koe speaks early.)
	p.waitFor(`koeTest.subs.some((s) => s.text.endsWith("at home!")) && koeOverlay.pending() === 0`)
	var subs []subEntry
	p.eval(`koeTest.subs`, &subs)
	var got []string
	for i, s := range subs {
		if i > 0 && s.Chunk == subs[i-1].Chunk {
			continue
		}
		got = append(got, strings.TrimSpace(s.Text))
	}
	if strings.Join(got, " ") != answer {
		t.Fatalf("the overlay's subtitles were %q, want the pieces of %q in order", got, answer)
	}
	var srcs []srcEntry
	p.eval(`koeTest.srcs`, &srcs)
	talked := false
	for _, s := range srcs {
		talked = talked || s.Src == "/avatars/talk.png"
	}
	if !talked {
		t.Fatalf("the avatar never talked: %+v", srcs)
	}
}
