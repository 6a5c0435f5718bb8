package app_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/livechat"
	"koe/testkit/ircdtest"
)

// TestLiveChatModeratedFromChat: over a real IRC server (ngircd, where
// the channel's own account is the broadcaster), the broadcaster steers
// the live chat from the chat (pause, ban, resume, skip, clear) while a
// viewer's commands are ignored and never answered; the pause, the
// waiting messages and the ban survive a restart of koe; replies are
// posted in the channel without emotion tags or citation marks; a /me
// reaches the model as an action; and a restored queue older than
// max_message_age is dropped, not answered.
func TestLiveChatModeratedFromChat(t *testing.T) {
	const pass = "oauth:bot-token"
	irc := ircdtest.Start(t, pass)
	k := startLiveKoeOn(t, irc, func(c *config.Config) {
		c.LiveChat.ReplyInChat = true
		c.LiveChat.Twitch.Nick = "koebot"
		c.LiveChat.Twitch.Token = livechat.Secret(strings.TrimPrefix(pass, "oauth:"))
		c.LiveChat.MaxPerViewerPerMinute = 20
		c.LiveChat.MaxNoteChars = 0 // the turns are the messages alone
	})
	streamer := ircdtest.NewChatterPass(t, irc.Plain, "koe", "koe", pass)
	alice := ircdtest.NewChatterPass(t, irc.Plain, "alice", "koe", pass)
	bob := ircdtest.NewChatterPass(t, irc.Plain, "bob", "koe", pass)

	// A reply is posted in the chat, in the words shown, without marks.
	alice.Send("PRIVMSG #koe :where is the manual?")
	k.watchUntil("control", "conversation-chain-end")
	bob.WaitFor("PRIVMSG #koe :It is in the manual. Read it!")

	// The broadcaster pauses; a viewer's resume is ignored.
	streamer.Send("PRIVMSG #koe :!pause")
	k.waitStatus("paused from the chat", func(st livechat.Status) bool { return st.Paused })
	bob.Send("PRIVMSG #koe :!resume")
	k.waitStatus("the viewer's command dropped", func(st livechat.Status) bool {
		return st.Dropped[livechat.DropCommand] == 1 && st.Paused
	})
	alice.Send("PRIVMSG #koe :first question")
	bob.Send("PRIVMSG #koe :second question")
	streamer.Send("PRIVMSG #koe :!ban Troll")
	k.waitStatus("two waiting, troll banned", func(st livechat.Status) bool {
		return st.Queued == 2 && slices.Equal(st.Banned, []string{"troll"})
	})
	troll := ircdtest.NewChatterPass(t, irc.Plain, "troll", "koe", pass)
	troll.Send("PRIVMSG #koe :let me in")
	k.waitStatus("the banned viewer dropped", func(st livechat.Status) bool { return st.Dropped[livechat.DropBlocked] == 1 })

	// koe restarts: the pause, the queue and the ban are back.
	cfg := k.cfg
	_ = k.koe.Close()
	k.open(cfg)
	if st := k.status(); !st.Paused || st.Queued != 2 || !slices.Equal(st.Banned, []string{"troll"}) {
		t.Fatalf("after the restart: %+v", st)
	}
	if n := len(k.chatTurns()); n != 1 {
		t.Fatalf("%d chat turns before the resume, want 1", n)
	}
	streamer.Send("PRIVMSG #koe :!resume")
	k.watchUntil("control", "conversation-chain-end")
	turns := k.chatTurns()
	if last := turns[len(turns)-1]; last != chatTurn("alice", "first question", "bob", "second question") {
		t.Fatalf("after the resume the LLM was asked %q", last)
	}
	alice.WaitFor("PRIVMSG #koe :Thank you for the message. See you soon.")

	// Skip, from the chat, stops the turn being spoken.
	alice.Send("PRIVMSG #koe :tell me a story")
	k.watchUntil("control", "conversation-chain-start")
	streamer.Send("PRIVMSG #koe :!skip")
	k.watchUntil("control", "interrupt")
	k.waitStatus("the skipped turn counted", func(st livechat.Status) bool { return st.Skipped == 1 && !st.Running })

	// A /me is an action.
	bob.Send("PRIVMSG #koe :\x01ACTION waves at everyone\x01")
	k.waitStatus("the action answered", func(st livechat.Status) bool { return st.Spoken == 2 && !st.Running })
	turns = k.chatTurns()
	if last := turns[len(turns)-1]; last != "<live_chat>\n"+`viewer bob does: "waves at everyone"`+"\n</live_chat>" {
		t.Fatalf("the action reached the LLM as %q", last)
	}

	// Clear drops the queue.
	streamer.Send("PRIVMSG #koe :!pause")
	// A command from the chat runs on the chat's own goroutine, and two
	// chatters' lines may reach koe in either order: the pause first.
	k.waitStatus("paused again", func(st livechat.Status) bool { return st.Paused })
	alice.Send("PRIVMSG #koe :old news")
	k.waitStatus("one waiting", func(st livechat.Status) bool { return st.Paused && st.Queued == 1 })
	streamer.Send("PRIVMSG #koe :!clear")
	k.waitStatus("the queue cleared", func(st livechat.Status) bool { return st.Queued == 0 })

	// A question that waited past max_message_age is not answered after
	// a restart and a resume.
	alice.Send("PRIVMSG #koe :stale question")
	k.waitStatus("one waiting", func(st livechat.Status) bool { return st.Queued == 1 })
	_ = k.koe.Close()
	cfg.LiveChat.MaxMessageAge = time.Nanosecond
	k.open(cfg)
	streamer.Send("PRIVMSG #koe :!resume")
	st := k.waitStatus("the stale message dropped", func(st livechat.Status) bool {
		return !st.Paused && st.Dropped[livechat.DropStale] == 1 && st.Queued == 0
	})
	if st.Turns != 0 {
		t.Fatalf("a turn started after the stale message: %+v", st)
	}
	for _, turn := range k.chatTurns() {
		for _, never := range []string{"!resume", "!pause", "!ban", "let me in", "old news", "stale question"} {
			if strings.Contains(turn, never) {
				t.Fatalf("the LLM heard %q: %q", never, turn)
			}
		}
	}
}
