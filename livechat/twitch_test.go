package livechat

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"koe/testkit/ircdtest"
)

// waitConnected waits until tw's Connected is want.
func waitConnected(t *testing.T, tw *Twitch, want bool) {
	t.Helper()
	deadline := time.After(safety)
	for {
		ch := tw.Changed()
		if tw.Connected() == want {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("Connected never became %v", want)
		}
	}
}

func nextMessage(t *testing.T, got <-chan Message) Message {
	t.Helper()
	select {
	case m := <-got:
		return m
	case <-time.After(safety):
		t.Fatal("no message arrived")
		return Message{}
	}
}

// runTwitch runs the source until the test ends and checks how Run ended.
func runTwitch(t *testing.T, tw *Twitch) (<-chan Message, <-chan error, context.CancelFunc) {
	t.Helper()
	got := make(chan Message, 100)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		done <- tw.Run(ctx, func(m Message) { got <- m })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(safety):
			t.Error("Twitch.Run did not return after cancel")
		}
	})
	return got, done, cancel
}

func fastTwitch(server string) TwitchConfig {
	c := DefaultTwitchConfig()
	c.Server = server
	c.Channel = "#Koe"
	c.ReconnectMin = 20 * time.Millisecond
	c.ReconnectMax = 200 * time.Millisecond
	return c
}

func TestTwitchAgainstNgircdTLSAndReconnect(t *testing.T) {
	srv := ircdtest.Start(t, "")
	certFile := srv.CertFile
	cfg := fastTwitch(fmt.Sprintf("127.0.0.1:%d", srv.TLS))
	cfg.CAFile = certFile
	tw, err := NewTwitch(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, done, cancel := runTwitch(t, tw)
	waitConnected(t, tw, true)

	alice := ircdtest.NewChatter(t, srv.Plain, "alice", "koe")
	alice.Send("PRIVMSG justinfan0 :not for the channel") // no such nick: refused by the server
	alice.Send("PRIVMSG #elsewhere :another channel")
	alice.Send("PRIVMSG #koe :hello there, koe")
	alice.Send("PRIVMSG #koe :second line")
	m := nextMessage(t, got)
	if m.Platform != "twitch" || m.Channel != "koe" || m.User != "alice" || m.Login != "alice" || m.Text != "hello there, koe" || m.Removes || m.Time.IsZero() {
		t.Fatalf("message %+v", m)
	}
	if m := nextMessage(t, got); m.Text != "second line" {
		t.Fatalf("second message %+v", m)
	}

	// Kill the server: the client notices, and reconnects once it is back.
	srv.Stop()
	waitConnected(t, tw, false)
	srv.Start()
	waitConnected(t, tw, true)
	bob := ircdtest.NewChatter(t, srv.Plain, "Bob", "koe")
	bob.Send("PRIVMSG #koe :after the restart")
	if m := nextMessage(t, got); m.User != "Bob" || m.Login != "bob" || m.Text != "after the restart" {
		t.Fatalf("message after restart %+v", m)
	}

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	if tw.Connected() {
		t.Fatal("still connected after Run returned")
	}
}

func TestTwitchTLSRejectsUnknownCert(t *testing.T) {
	srv := ircdtest.Start(t, "")
	cfg := fastTwitch(fmt.Sprintf("127.0.0.1:%d", srv.TLS))
	tw, err := NewTwitch(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Without ca_file the self-signed certificate is refused: a session
	// fails at the handshake and the client keeps retrying.
	_, err = tw.session(context.Background(), func(Message) {})
	var uerr x509.UnknownAuthorityError
	if !errors.As(err, &uerr) {
		t.Fatalf("session error %v, want an unknown-authority error", err)
	}
}

func TestTwitchBadTokenIsConfigError(t *testing.T) {
	srv := ircdtest.Start(t, "oauth:right-token")
	cfg := fastTwitch(fmt.Sprintf("127.0.0.1:%d", srv.Plain))
	off := false
	cfg.TLS = &off
	cfg.Nick = "koebot"
	cfg.Token = "wrong-token"
	tw, err := NewTwitch(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, done, _ := runTwitch(t, tw)
	select {
	case err := <-done:
		if !errors.Is(err, ErrConfig) || strings.Contains(err.Error(), "wrong-token") {
			t.Fatalf("Run returned %v, want an ErrConfig without the token", err)
		}
	case <-time.After(safety):
		t.Fatal("Run kept retrying a refused token")
	}

	// The right token gets in.
	cfg.Token = "right-token"
	tw, err = NewTwitch(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	runTwitch(t, tw)
	waitConnected(t, tw, true)
}

// scripted is a loopback server playing Twitch's side line by line.
type scripted struct {
	t *testing.T
	l net.Listener
}

func newScripted(t *testing.T) *scripted {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &scripted{t: t, l: l}
}

type scriptConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func (s *scripted) accept() *scriptConn {
	s.t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := s.l.Accept()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			s.t.Fatal(r.err)
		}
		s.t.Cleanup(func() { r.c.Close() })
		_ = r.c.SetDeadline(time.Now().Add(safety))
		return &scriptConn{t: s.t, conn: r.c, r: bufio.NewReader(r.c)}
	case <-time.After(safety):
		s.l.Close()
		<-ch
		s.t.Fatal("the client did not connect")
		return nil
	}
}

func (c *scriptConn) expect(want string) string {
	c.t.Helper()
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("waiting for %q: %v", want, err)
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, want) {
		c.t.Fatalf("client sent %q, want %q", line, want)
	}
	return line
}

func (c *scriptConn) send(lines ...string) {
	c.t.Helper()
	for _, l := range lines {
		if _, err := c.conn.Write([]byte(l + "\r\n")); err != nil {
			c.t.Fatal(err)
		}
	}
}

// login plays the server side of a login and join; it returns the nick.
func (c *scriptConn) login(token string) string {
	c.t.Helper()
	c.expect("CAP REQ :twitch.tv/tags twitch.tv/commands")
	if token != "" {
		c.expect("PASS oauth:" + token)
	}
	nick := strings.TrimPrefix(c.expect("NICK "), "NICK ")
	c.expect("USER " + nick + " ")
	c.expect("CAP END")
	c.send(":tmi.twitch.tv CAP * ACK :twitch.tv/tags twitch.tv/commands",
		":tmi.twitch.tv 001 "+nick+" :Welcome, GLHF!")
	c.expect("JOIN #koe")
	c.send(":" + nick + "!" + nick + "@" + nick + ".tmi.twitch.tv JOIN #koe")
	return nick
}

func TestTwitchProtocol(t *testing.T) {
	srv := newScripted(t)
	cfg := fastTwitch(srv.l.Addr().String())
	off := false
	cfg.TLS = &off
	cfg.Nick = "KoeBot"
	cfg.Token = "s3cret"
	cfg.MaxLineBytes = 1024
	tw, err := NewTwitch(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, done, _ := runTwitch(t, tw)

	// Session 1: messages with tags, removals, a PING, a too-long line,
	// then RECONNECT.
	c := srv.accept()
	if nick := c.login("s3cret"); nick != "koebot" {
		t.Fatalf("nick %q", nick)
	}
	waitConnected(t, tw, true)
	c.send("PING :tmi.twitch.tv")
	c.expect("PONG :tmi.twitch.tv")
	c.send(`@badge-info=;display-name=Ali\sce;id=msg-1;tmi-sent-ts=1700000000123;user-id=1 :alice!alice@alice.tmi.twitch.tv PRIVMSG #koe :hi; there`,
		"@display-name=Huge :huge!huge@huge.tmi.twitch.tv PRIVMSG #koe :"+strings.Repeat("x", 2000),
		"@display-name=;id=msg-2 :bob!bob@bob.tmi.twitch.tv PRIVMSG #koe :\x01ACTION waves\x01",
		"@login=alice;target-msg-id=msg-1;tmi-sent-ts=1700000000999 :tmi.twitch.tv CLEARMSG #koe :hi; there",
		"@ban-duration=600 :tmi.twitch.tv CLEARCHAT #koe :bob",
		":tmi.twitch.tv CLEARCHAT #koe",
		":tmi.twitch.tv NOTICE #koe :This room is now in slow mode.",
		":tmi.twitch.tv RECONNECT")
	m := nextMessage(t, got)
	if m.User != "Ali ce" || m.Login != "alice" || m.ID != "msg-1" || m.Text != "hi; there" || !m.Time.Equal(time.UnixMilli(1700000000123)) {
		t.Fatalf("tagged message %+v", m)
	}
	if m := nextMessage(t, got); m.User != "bob" || m.ID != "msg-2" || m.Text != "waves" || !m.Action {
		t.Fatalf("message after the long line %+v", m)
	}
	if m := nextMessage(t, got); !m.Removes || m.ID != "msg-1" || m.Login != "alice" || m.Channel != "koe" {
		t.Fatalf("CLEARMSG %+v", m)
	}
	if m := nextMessage(t, got); !m.Removes || m.ID != "" || m.Login != "bob" {
		t.Fatalf("CLEARCHAT of a user %+v", m)
	}
	if m := nextMessage(t, got); !m.Removes || m.ID != "" || m.Login != "" {
		t.Fatalf("CLEARCHAT of all %+v", m)
	}

	// Session 2: the login is refused; Run gives up with ErrConfig.
	c = srv.accept()
	c.expect("CAP REQ")
	c.send(":tmi.twitch.tv NOTICE * :Login authentication failed")
	select {
	case err := <-done:
		if !errors.Is(err, ErrConfig) || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("Run returned %v, want an ErrConfig without the token", err)
		}
	case <-time.After(safety):
		t.Fatal("Run did not give up on a refused login")
	}
}

func TestTwitchReadTimeoutReconnects(t *testing.T) {
	srv := newScripted(t)
	cfg := fastTwitch(srv.l.Addr().String())
	off := false
	cfg.TLS = &off
	cfg.ReadTimeout = 200 * time.Millisecond // the silent server below hits it
	tw, err := NewTwitch(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	runTwitch(t, tw)
	c := srv.accept()
	first := c.login("")
	waitConnected(t, tw, true)
	// Silence: the client gives up on this connection and comes back.
	waitConnected(t, tw, false)
	c = srv.accept()
	if second := c.login(""); second == "" || second == first && len(first) == 0 {
		t.Fatalf("nick %q after reconnect", second)
	}
	waitConnected(t, tw, true)
}

func TestTwitchAnonymousNick(t *testing.T) {
	srv := newScripted(t)
	cfg := fastTwitch(srv.l.Addr().String())
	off := false
	cfg.TLS = &off
	tw, err := NewTwitch(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	runTwitch(t, tw)
	c := srv.accept()
	nick := c.login("")
	if !strings.HasPrefix(nick, "justinfan") || strings.Trim(nick[len("justinfan"):], "0123456789") != "" || len(nick) <= len("justinfan") {
		t.Fatalf("anonymous nick %q", nick)
	}
	waitConnected(t, tw, true)
}

func TestParseIRC(t *testing.T) {
	m, err := parseIRC(`@a=1;b=x\:y\\z\sw;c :nick!u@h PRIVMSG #chan :text with :colon`)
	if err != nil {
		t.Fatal(err)
	}
	if m.tags["a"] != "1" || m.tags["b"] != `x;y\z w` || m.tags["c"] != "" || m.nick() != "nick" || m.command != "PRIVMSG" ||
		len(m.params) != 2 || m.params[0] != "#chan" || m.params[1] != "text with :colon" {
		t.Fatalf("parsed %+v", m)
	}
	for _, bad := range []string{"", "@tags-only", ":prefix-only", "   "} {
		if _, err := parseIRC(bad); err == nil {
			t.Errorf("parseIRC(%q) gave no error", bad)
		}
	}
}

func TestNewTwitchConfigErrors(t *testing.T) {
	base := DefaultTwitchConfig()
	base.Channel = "koe"
	cases := map[string]func(*TwitchConfig){
		"live_chat.twitch.channel":  func(c *TwitchConfig) { c.Channel = "" },
		"may hold only":             func(c *TwitchConfig) { c.Channel = "ko e" },
		"live_chat.twitch.nick":     func(c *TwitchConfig) { c.Token = "t" },
		"live_chat.twitch.ca_file":  func(c *TwitchConfig) { c.CAFile = "/nonexistent/ca.pem" },
		"max_line_bytes":            func(c *TwitchConfig) { c.MaxLineBytes = 100 },
		"live_chat.twitch.server":   func(c *TwitchConfig) { c.Server = "nohostport" },
		"reconnect_max":             func(c *TwitchConfig) { c.ReconnectMin, c.ReconnectMax = time.Minute, time.Second },
		"live_chat.twitch.nick \"a": func(c *TwitchConfig) { c.Nick = "a b" },
	}
	for want, mod := range cases {
		c := base
		mod(&c)
		_, err := NewTwitch(c, nil)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v", want, err)
		}
	}
	if _, err := NewTwitch(base, nil); err != nil {
		t.Fatal(err)
	}
}
