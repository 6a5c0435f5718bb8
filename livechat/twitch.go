package livechat

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Twitch reads one Twitch channel's chat over IRC (IRCv3 tags, TLS by
// default). It implements Source.
type Twitch struct {
	cfg     TwitchConfig
	channel string // lower case, without '#'
	log     *slog.Logger
	tlsConf *tls.Config

	running atomic.Bool

	mu        sync.Mutex
	connected bool
	changed   chan struct{}           // closed and replaced at each change of connected
	post      func(line string) error // the joined session's writer; nil while not joined
}

// errReconnect ends a session when the server asks for a reconnect.
var errReconnect = errors.New("server asked to reconnect")

// NewTwitch checks cfg (zero fields take their defaults) and makes the
// source. Errors wrap ErrConfig.
func NewTwitch(cfg TwitchConfig, log *slog.Logger) (*Twitch, error) {
	cfg = twitchDefaults(cfg)
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	ch, _ := normChannel(cfg.Channel)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Twitch{
		cfg:     cfg,
		channel: ch,
		log:     log.With("component", "livechat", "source", "twitch", "channel", ch),
		changed: make(chan struct{}),
	}
	if cfg.UseTLS() {
		host, _, err := net.SplitHostPort(cfg.Server)
		if err != nil {
			return nil, fmt.Errorf("%w: live_chat.twitch.server %q: %w", ErrConfig, cfg.Server, err)
		}
		t.tlsConf = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%w: live_chat.twitch.ca_file: %w", ErrConfig, err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: live_chat.twitch.ca_file %s holds no PEM certificate", ErrConfig, cfg.CAFile)
			}
			t.tlsConf.RootCAs = pool
		}
	}
	return t, nil
}

func twitchDefaults(c TwitchConfig) TwitchConfig {
	d := DefaultTwitchConfig()
	if c.Server == "" {
		c.Server = d.Server
	}
	setDur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setDur(&c.DialTimeout, d.DialTimeout)
	setDur(&c.ReadTimeout, d.ReadTimeout)
	setDur(&c.WriteTimeout, d.WriteTimeout)
	setDur(&c.ReconnectMin, d.ReconnectMin)
	setDur(&c.ReconnectMax, max(d.ReconnectMax, c.ReconnectMin))
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = d.MaxLineBytes
	}
	return c
}

func normChannel(s string) (string, error) {
	s = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(s), "#"))
	if s == "" {
		return "", errors.New("must name a channel")
	}
	if len(s) > 50 {
		return "", fmt.Errorf("%q is longer than 50 characters", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return "", fmt.Errorf("%q may hold only letters, digits and _", s)
		}
	}
	return s, nil
}

func validNick(s string) bool {
	if s == "" || len(s) > 25 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// Name is "twitch".
func (t *Twitch) Name() string { return "twitch" }

// Connected reports whether the client has joined the channel.
func (t *Twitch) Connected() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.connected
}

// Changed returns a channel closed at the next change of Connected.
func (t *Twitch) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

func (t *Twitch) setConnected(v bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.connected == v {
		return
	}
	t.connected = v
	close(t.changed)
	t.changed = make(chan struct{})
}

// Run reads chat until ctx ends, reconnecting with exponential back-off
// and jitter; the back-off starts over after a session that got in. It
// returns ctx.Err(), or an error wrapping ErrConfig when the server
// refuses the login.
func (t *Twitch) Run(ctx context.Context, deliver func(Message)) error {
	if !t.running.CompareAndSwap(false, true) {
		return errors.New("live chat: twitch source is already running")
	}
	defer t.running.Store(false)
	backoff := t.cfg.ReconnectMin
	for {
		welcomed, err := t.session(ctx, deliver)
		t.setConnected(false)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrConfig) {
			t.log.Error("live chat: twitch login refused; not retrying", "err", err)
			return err
		}
		if welcomed {
			backoff = t.cfg.ReconnectMin
		}
		delay := backoff/2 + rand.N(backoff/2+1)
		t.log.Warn("live chat: twitch connection ended; reconnecting", "err", err, "in", delay)
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		backoff = min(backoff*2, t.cfg.ReconnectMax)
	}
}

func (t *Twitch) dial(ctx context.Context) (net.Conn, error) {
	d := &net.Dialer{Timeout: t.cfg.DialTimeout, KeepAlive: 30 * time.Second}
	if t.tlsConf == nil {
		return d.DialContext(ctx, "tcp", t.cfg.Server)
	}
	td := &tls.Dialer{NetDialer: d, Config: t.tlsConf}
	return td.DialContext(ctx, "tcp", t.cfg.Server)
}

// session runs one connection. welcomed reports whether the server let
// the client in.
func (t *Twitch) session(ctx context.Context, deliver func(Message)) (welcomed bool, err error) {
	conn, err := t.dial(ctx)
	if err != nil {
		return false, fmt.Errorf("dial %s: %w", t.cfg.Server, err)
	}
	defer conn.Close()
	// ctx ending closes the connection, which ends a blocked read.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	// The read loop (PONG) and Post write to the connection: one line
	// at a time.
	var wmu sync.Mutex
	send := func(line string) error {
		wmu.Lock()
		defer wmu.Unlock()
		if err := conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout)); err != nil {
			return err
		}
		if _, err := io.WriteString(conn, line+"\r\n"); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return nil
	}
	defer t.setPost(nil)
	nick := strings.ToLower(t.cfg.Nick)
	if t.cfg.Token == "" {
		nick = "justinfan" + strconv.Itoa(10000+rand.IntN(90000000))
	}
	login := []string{"CAP REQ :twitch.tv/tags twitch.tv/commands"}
	if t.cfg.Token != "" {
		login = append(login, "PASS oauth:"+t.cfg.Token.Reveal())
	}
	login = append(login, "NICK "+nick, "USER "+nick+" 0 * :"+nick, "CAP END")
	for _, l := range login {
		if err := send(l); err != nil {
			return false, err
		}
	}

	br := bufio.NewReaderSize(conn, t.cfg.MaxLineBytes)
	for {
		if err := conn.SetReadDeadline(time.Now().Add(t.cfg.ReadTimeout)); err != nil {
			return welcomed, err
		}
		line, err := readLine(br)
		if errors.Is(err, errLineTooLong) {
			t.log.Warn("live chat: twitch line longer than max_line_bytes dropped", "max_line_bytes", t.cfg.MaxLineBytes)
			continue
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return welcomed, fmt.Errorf("nothing from the server for %s (read_timeout)", t.cfg.ReadTimeout)
			}
			return welcomed, fmt.Errorf("read: %w", err)
		}
		if line == "" {
			continue
		}
		m, err := parseIRC(line)
		if err != nil {
			t.log.Debug("live chat: bad IRC line", "err", err)
			continue
		}
		switch m.command {
		case "PING":
			if err := send("PONG :" + m.param(0)); err != nil {
				return welcomed, err
			}
		case "001":
			welcomed = true
			if err := send("JOIN #" + t.channel); err != nil {
				return welcomed, err
			}
		case "JOIN":
			if strings.EqualFold(m.nick(), nick) && strings.EqualFold(m.param(0), "#"+t.channel) {
				if t.cfg.Token != "" {
					t.setPost(send)
				}
				t.setConnected(true)
				t.log.Info("live chat: twitch channel joined", "nick", nick)
			}
		case "PART", "KICK":
			target := m.nick()
			if m.command == "KICK" {
				target = m.param(1)
			}
			if strings.EqualFold(target, nick) && strings.EqualFold(m.param(0), "#"+t.channel) {
				return welcomed, fmt.Errorf("left the channel (%s)", m.command)
			}
		case "RECONNECT":
			return welcomed, errReconnect
		case "ERROR":
			if strings.Contains(strings.ToLower(m.param(0)), "password") {
				return welcomed, fmt.Errorf("%w: the server refused the token in %s: %s", ErrConfig, TokenEnv, m.param(0))
			}
			return welcomed, fmt.Errorf("server closed the connection: %s", m.param(0))
		case "464": // ERR_PASSWDMISMATCH
			return welcomed, fmt.Errorf("%w: the server refused the token in %s: %s", ErrConfig, TokenEnv, m.param(len(m.params)-1))
		case "432", "433": // erroneous nick, nick in use
			return welcomed, fmt.Errorf("nick %s refused: %s", nick, m.param(len(m.params)-1))
		case "NOTICE":
			text := m.param(1)
			if isLoginFailure(text) {
				return welcomed, fmt.Errorf("%w: twitch refused the login (%s): check %s and live_chat.twitch.nick", ErrConfig, text, TokenEnv)
			}
			t.log.Info("live chat: twitch notice", "text", cleanText(text, 300), "msg_id", m.tags["msg-id"])
		case "PRIVMSG":
			if !strings.EqualFold(m.param(0), "#"+t.channel) {
				continue
			}
			deliver(t.privmsg(m))
		case "USERNOTICE":
			if msg, ok := t.usernotice(m); ok {
				deliver(msg)
			}
		case "CLEARMSG":
			if id := m.tags["target-msg-id"]; id != "" {
				deliver(Message{Platform: "twitch", Channel: t.channel, Login: m.tags["login"], ID: id, Removes: true, Time: m.sentAt()})
			}
		case "CLEARCHAT":
			// With a user: that user's messages; without: the whole chat.
			deliver(Message{Platform: "twitch", Channel: t.channel, Login: strings.ToLower(m.param(1)), Removes: true, Time: m.sentAt()})
		}
	}
}

// privmsg is a chat message: a /me action, a cheer, or words; from a
// moderator or the broadcaster, their commands are run.
func (t *Twitch) privmsg(m ircMsg) Message {
	user := m.tags["display-name"]
	if user == "" {
		user = m.nick()
	}
	login := strings.ToLower(m.nick())
	msg := Message{
		Platform: "twitch",
		Channel:  t.channel,
		User:     user,
		Login:    login,
		Text:     m.param(1),
		Time:     m.sentAt(),
		ID:       m.tags["id"],
		Mod:      t.isMod(m, login),
	}
	// CTCP ACTION: "\x01ACTION waves\x01" is "/me waves".
	if inner, ok := strings.CutPrefix(msg.Text, "\x01ACTION "); ok {
		msg.Text, msg.Action = strings.TrimSuffix(inner, "\x01"), true
	}
	if bits, err := strconv.Atoi(m.tags["bits"]); err == nil && bits > 0 {
		msg.Event, msg.Amount = EventCheer, bits
	}
	return msg
}

// isMod: the broadcaster (the channel's own account, or its badge) or a
// moderator (the mod tag, or its badge).
func (t *Twitch) isMod(m ircMsg, login string) bool {
	if login == t.channel || m.tags["mod"] == "1" {
		return true
	}
	for _, b := range strings.Split(m.tags["badges"], ",") {
		name, _, _ := strings.Cut(b, "/")
		if name == "broadcaster" || name == "moderator" {
			return true
		}
	}
	return false
}

// usernotice reads the events a thank-you may answer: subscriptions and
// their renewals, gifts, raids. Others (announcements...) are not heard.
func (t *Twitch) usernotice(m ircMsg) (Message, bool) {
	if !strings.EqualFold(m.param(0), "#"+t.channel) {
		return Message{}, false
	}
	login := strings.ToLower(m.tags["login"])
	user := m.tags["display-name"]
	if user == "" {
		user = login
	}
	msg := Message{Platform: "twitch", Channel: t.channel, User: user, Login: login, Text: m.param(1), Time: m.sentAt(), ID: m.tags["id"]}
	num := func(tag string) int {
		n, _ := strconv.Atoi(m.tags[tag])
		return max(n, 0)
	}
	switch m.tags["msg-id"] {
	case "sub", "resub":
		msg.Event, msg.Amount = EventSub, num("msg-param-cumulative-months")
	case "subgift":
		msg.Event, msg.Recipient = EventGift, m.tags["msg-param-recipient-display-name"]
		if msg.Recipient == "" {
			msg.Recipient = m.tags["msg-param-recipient-user-name"]
		}
	case "submysterygift":
		msg.Event, msg.Amount = EventGift, num("msg-param-mass-gift-count")
	case "raid":
		msg.Event, msg.Amount = EventRaid, num("msg-param-viewerCount")
		if name := m.tags["msg-param-displayName"]; name != "" {
			msg.User = name
		}
	default:
		return Message{}, false
	}
	return msg, true
}

func (t *Twitch) setPost(send func(string) error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.post = send
}

// Post sends text to the channel as the account of the token: one line,
// cut to Twitch's 500 characters. It fails while the channel is not
// joined, and without a token (anonymous accounts cannot write).
func (t *Twitch) Post(ctx context.Context, text string) error {
	if t.cfg.Token == "" {
		return fmt.Errorf("%w: posting in the chat needs live_chat.twitch.nick and the token in %s", ErrConfig, TokenEnv)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	send := t.post
	t.mu.Unlock()
	if send == nil {
		return errors.New("the twitch channel is not joined")
	}
	text = cleanText(text, twitchMaxChars)
	if text == "" {
		return nil
	}
	return send("PRIVMSG #" + t.channel + " :" + text)
}

func isLoginFailure(text string) bool {
	l := strings.ToLower(text)
	return strings.Contains(l, "login authentication failed") ||
		strings.Contains(l, "improperly formatted auth") ||
		strings.Contains(l, "login unsuccessful")
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line within the reader's buffer size; a longer line
// is consumed and reported as errLineTooLong.
func readLine(br *bufio.Reader) (string, error) {
	b, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
		if err != nil {
			return "", err
		}
		return "", errLineTooLong
	}
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// ircMsg is one parsed IRC line.
type ircMsg struct {
	tags    map[string]string
	prefix  string
	command string
	params  []string
}

func (m ircMsg) param(i int) string {
	if i < 0 || i >= len(m.params) {
		return ""
	}
	return m.params[i]
}

// nick is the nick of the prefix (nick!user@host).
func (m ircMsg) nick() string {
	p := m.prefix
	if i := strings.IndexAny(p, "!@"); i >= 0 {
		p = p[:i]
	}
	return p
}

// sentAt is the tmi-sent-ts tag, or now.
func (m ircMsg) sentAt() time.Time {
	if ms, err := strconv.ParseInt(m.tags["tmi-sent-ts"], 10, 64); err == nil && ms > 0 {
		return time.UnixMilli(ms)
	}
	return time.Now()
}

// parseIRC parses "[@tags] [:prefix] COMMAND [params] [:trailing]".
func parseIRC(line string) (ircMsg, error) {
	var m ircMsg
	rest := line
	if strings.HasPrefix(rest, "@") {
		tags, after, ok := strings.Cut(rest[1:], " ")
		if !ok {
			return m, fmt.Errorf("tags without a command")
		}
		m.tags = make(map[string]string)
		for _, kv := range strings.Split(tags, ";") {
			k, v, _ := strings.Cut(kv, "=")
			if k != "" {
				m.tags[k] = unescapeTag(v)
			}
		}
		rest = strings.TrimLeft(after, " ")
	}
	if strings.HasPrefix(rest, ":") {
		p, after, ok := strings.Cut(rest[1:], " ")
		if !ok {
			return m, fmt.Errorf("prefix without a command")
		}
		m.prefix = p
		rest = strings.TrimLeft(after, " ")
	}
	cmd, rest, _ := strings.Cut(rest, " ")
	if cmd == "" {
		return m, fmt.Errorf("no command")
	}
	m.command = strings.ToUpper(cmd)
	for rest != "" {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			break
		}
		if rest[0] == ':' {
			m.params = append(m.params, rest[1:])
			break
		}
		var p string
		p, rest, _ = strings.Cut(rest, " ")
		m.params = append(m.params, p)
	}
	if m.tags == nil {
		m.tags = map[string]string{}
	}
	return m, nil
}

// unescapeTag undoes IRCv3 tag value escaping.
func unescapeTag(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(v) {
			break
		}
		i++
		switch v[i] {
		case ':':
			b.WriteByte(';')
		case 's':
			b.WriteByte(' ')
		case 'r':
			b.WriteByte('\r')
		case 'n':
			b.WriteByte('\n')
		default:
			b.WriteByte(v[i])
		}
	}
	return b.String()
}
