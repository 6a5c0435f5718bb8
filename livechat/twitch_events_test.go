package livechat

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"koe/testkit/ircdtest"
)

// botTwitch reads #koe on server without TLS as the account koebot.
func botTwitch(t *testing.T, server, token string) *Twitch {
	t.Helper()
	cfg := fastTwitch(server)
	off := false
	cfg.TLS = &off
	cfg.Nick = "koebot"
	cfg.Token = Secret(token)
	tw, err := NewTwitch(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tw
}

// Twitch's tags as a scripted server sends them: moderators and the
// broadcaster (by the mod tag, a badge, or the channel's own account) are
// told apart from viewers, /me is an action, a cheer and the USERNOTICEs
// of subs, gifts and raids are events; and Post writes to the channel as
// the account once it has joined.
func TestTwitchTagsEventsAndPost(t *testing.T) {
	srv := newScripted(t)
	tw := botTwitch(t, srv.l.Addr().String(), "s3cret")
	if err := tw.Post(context.Background(), "too early"); err == nil {
		t.Fatal("Post before the channel is joined did not fail")
	}
	got, _, _ := runTwitch(t, tw)
	c := srv.accept()
	c.login("s3cret")
	waitConnected(t, tw, true)

	c.send(
		`@badges=moderator/1;display-name=Mia;mod=1 :mia!mia@mia.tmi.twitch.tv PRIVMSG #koe :!pause`,
		`@badges=broadcaster/1;display-name=Koe;mod=0 :koe!koe@koe.tmi.twitch.tv PRIVMSG #koe :!skip`,
		`@badges=vip/1;display-name=Vic;mod=0 :vic!vic@vic.tmi.twitch.tv PRIVMSG #koe :!skip`,
		`@badges=subscriber/12,moderator/1;mod=0 :mo!mo@mo.tmi.twitch.tv PRIVMSG #koe :!clear`,
		"@display-name=Al :al!al@al.tmi.twitch.tv PRIVMSG #koe :\x01ACTION waves hello\x01",
		`@bits=250;display-name=Cheery :cheery!cheery@cheery.tmi.twitch.tv PRIVMSG #koe :Cheer250 love it`,
		`@display-name=Rai;login=rai;msg-id=raid;msg-param-displayName=Rai;msg-param-viewerCount=42 :tmi.twitch.tv USERNOTICE #koe`,
		`@display-name=Sub;login=sub;msg-id=resub;msg-param-cumulative-months=7 :tmi.twitch.tv USERNOTICE #koe :seven months!`,
		`@display-name=Gi;login=gi;msg-id=subgift;msg-param-recipient-display-name=Lucky :tmi.twitch.tv USERNOTICE #koe`,
		`@display-name=An;login=an;msg-id=announcement :tmi.twitch.tv USERNOTICE #koe :not an event to thank`,
		`@display-name=X;login=x;msg-id=raid;msg-param-viewerCount=9 :tmi.twitch.tv USERNOTICE #elsewhere`,
	)
	want := []struct {
		user, text  string
		mod, action bool
		event       string
		amount      int
		recipient   string
	}{
		{"Mia", "!pause", true, false, "", 0, ""},
		{"Koe", "!skip", true, false, "", 0, ""},
		{"Vic", "!skip", false, false, "", 0, ""},
		{"mo", "!clear", true, false, "", 0, ""},
		{"Al", "waves hello", false, true, "", 0, ""},
		{"Cheery", "Cheer250 love it", false, false, EventCheer, 250, ""},
		{"Rai", "", false, false, EventRaid, 42, ""},
		{"Sub", "seven months!", false, false, EventSub, 7, ""},
		{"Gi", "", false, false, EventGift, 0, "Lucky"},
	}
	for _, w := range want {
		m := nextMessage(t, got)
		if m.User != w.user || m.Text != w.text || m.Mod != w.mod || m.Action != w.action || m.Event != w.event || m.Amount != w.amount || m.Recipient != w.recipient {
			t.Fatalf("message %+v, want %+v", m, w)
		}
	}

	if err := tw.Post(context.Background(), "Hello chat!\nsecond line"); err != nil {
		t.Fatal(err)
	}
	c.expect("PRIVMSG #koe :Hello chat! second line")
	if err := tw.Post(context.Background(), strings.Repeat("é", 600)); err != nil {
		t.Fatal(err)
	}
	line := c.expect("PRIVMSG #koe :")
	if n := len([]rune(strings.TrimPrefix(line, "PRIVMSG #koe :"))); n != 500 {
		t.Fatalf("a post of 600 characters went as %d", n)
	}
}

// Anonymous, koe cannot write to the chat.
func TestTwitchPostNeedsToken(t *testing.T) {
	cfg := DefaultTwitchConfig()
	cfg.Channel = "koe"
	tw, err := NewTwitch(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Post(context.Background(), "hi"); err == nil || !strings.Contains(err.Error(), TokenEnv) {
		t.Fatalf("anonymous Post: %v", err)
	}
}

// Against ngircd: the account's posts reach the viewers in the channel,
// and the channel's own account (the broadcaster; ngircd has no tags) is
// a moderator.
func TestTwitchPostsToNgircd(t *testing.T) {
	srv := ircdtest.Start(t, "oauth:bot-token") // ngircd refuses a PASS it does not expect
	tw := botTwitch(t, fmt.Sprintf("127.0.0.1:%d", srv.Plain), "bot-token")
	got, _, _ := runTwitch(t, tw)
	waitConnected(t, tw, true)
	viewer := ircdtest.NewChatterPass(t, srv.Plain, "alice", "koe", "oauth:bot-token")
	if err := tw.Post(context.Background(), "Thanks for the raid!"); err != nil {
		t.Fatal(err)
	}
	viewer.WaitFor("PRIVMSG #koe :Thanks for the raid!")

	owner := ircdtest.NewChatterPass(t, srv.Plain, "koe", "koe", "oauth:bot-token")
	owner.Send("PRIVMSG #koe :!pause")
	viewer.Send("PRIVMSG #koe :!pause")
	if m := nextMessage(t, got); m.Login != "koe" || !m.Mod {
		t.Fatalf("the broadcaster's message %+v", m)
	}
	if m := nextMessage(t, got); m.Login != "alice" || m.Mod {
		t.Fatalf("a viewer's message %+v", m)
	}
}

// A raid read from a scripted Twitch server starts a thank-you turn, and
// the character's reply goes back to the channel in its short form, as
// the account: source, runner and poster together.
func TestRaidThankedAndAnsweredInChat(t *testing.T) {
	srv := newScripted(t)
	tw := botTwitch(t, srv.l.Addr().String(), "s3cret")
	cfg := testConfig()
	cfg.ReplyInChat, cfg.Twitch.Nick, cfg.Twitch.Token = true, "koebot", "s3cret"
	cfg.Thanks.Raid = true
	char := newRecChar(false)
	char.reply = "[happy] Welcome, raiders [1]! " + strings.Repeat("So glad you came by tonight. ", 30)
	r := NewRunner(cfg, char, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	for _, run := range []func(context.Context) error{r.Run, func(ctx context.Context) error { return r.RunReplies(ctx, tw) },
		func(ctx context.Context) error { return r.RunSource(ctx, tw) }} {
		go func() {
			_ = run(ctx)
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range 3 {
			<-done
		}
	})
	c := srv.accept()
	c.login("s3cret")
	waitConnected(t, tw, true)
	c.send(`@display-name=Rai;login=rai;msg-id=raid;msg-param-displayName=Rai;msg-param-viewerCount=42 :tmi.twitch.tv USERNOTICE #koe`)
	if got, want := char.next(t), "<live_chat>\nviewer Rai raids the stream with 42 viewers\n</live_chat>"; got != want {
		t.Fatalf("turn %q, want %q", got, want)
	}
	line := strings.TrimPrefix(c.expect("PRIVMSG #koe :Welcome, raiders! So glad"), "PRIVMSG #koe :")
	if n := len([]rune(line)); n > 500 || !strings.HasSuffix(line, "tonight.") || strings.ContainsAny(line, "[]") {
		t.Fatalf("posted %d characters: %q", n, line)
	}
}
