package livechat

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
)

// ErrConfig marks errors that retrying cannot cure: a source returns an
// error wrapping it when its configuration can never work (a refused token,
// say).
var ErrConfig = errors.New("live chat configuration")

// TokenEnv is the environment variable the Twitch OAuth token is read from.
// The token is never read from YAML.
const TokenEnv = "KOE_TWITCH_OAUTH_TOKEN"

// Config is the live_chat section of koe's configuration.
type Config struct {
	Enabled bool `yaml:"enabled" json:"enabled"`
	// Character is the conf_uid of the character that answers; "" is the
	// default character.
	Character string `yaml:"character" json:"character"`
	// History is the history id of the live session.
	History string `yaml:"history" json:"history"`
	// MaxPerMinute caps the turns started per minute. Over it the runner
	// waits; messages keep queueing.
	MaxPerMinute int `yaml:"max_per_minute" json:"max_per_minute"`
	// MaxPerViewerPerMinute caps the messages accepted from one viewer per
	// minute; more are dropped.
	MaxPerViewerPerMinute int `yaml:"max_per_viewer_per_minute" json:"max_per_viewer_per_minute"`
	// MaxQueue caps the messages waiting; beyond it the oldest are dropped.
	MaxQueue int `yaml:"max_queue" json:"max_queue"`
	// MaxBanned caps the session's blocklist (viewers banned from the
	// chat by a moderator's ban command).
	MaxBanned int `yaml:"max_banned" json:"max_banned"`
	// MaxBatch caps the messages folded into one turn.
	MaxBatch int `yaml:"max_batch" json:"max_batch"`
	// MaxMessageChars cuts longer messages (in characters, not bytes).
	MaxMessageChars int `yaml:"max_message_chars" json:"max_message_chars"`
	// MaxNameChars cuts longer viewer names.
	MaxNameChars int `yaml:"max_name_chars" json:"max_name_chars"`
	// Blocklist holds logins or display names never heard (any case).
	Blocklist []string `yaml:"blocklist" json:"blocklist"`
	// WordFilter drops messages containing one of these words or phrases:
	// case-insensitive, whole words, after Unicode normalisation (accents,
	// full-width forms and invisible characters do not hide a word).
	WordFilter []string `yaml:"word_filter" json:"word_filter"`
	// IgnorePrefixes drops messages starting with one of them (bot
	// commands such as "!").
	IgnorePrefixes []string `yaml:"ignore_prefixes" json:"ignore_prefixes"`
	// ViewerFormat formats one message: the first %s is the viewer's name,
	// the second the text ("%%" is a literal percent sign).
	ViewerFormat string `yaml:"viewer_format" json:"viewer_format"`
	// MaxNoteChars cuts what is remembered about a viewer.
	MaxNoteChars int `yaml:"max_note_chars" json:"max_note_chars"`
	// NotesTimeout bounds the look-up of what is remembered about viewers.
	NotesTimeout time.Duration `yaml:"notes_timeout" json:"notes_timeout"`
	// ActionFormat formats a /me action (IRC's CTCP ACTION) as
	// ViewerFormat formats a message: the viewer's name, then the action.
	ActionFormat string `yaml:"action_format" json:"action_format"`
	// MaxMessageAge drops a waiting message older than this when a turn
	// would take it (after a pause, a restart, a long queue): a stale
	// question is not answered. 0 keeps messages however old.
	MaxMessageAge time.Duration `yaml:"max_message_age" json:"max_message_age"`

	// Commands are the streamer's commands as moderators and the
	// broadcaster type them in the chat.
	Commands CommandsConfig `yaml:"commands" json:"commands"`

	// ReplyInChat posts each reply of the character to the channel as the
	// account of the token (live_chat.twitch.nick, KOE_TWITCH_OAUTH_TOKEN),
	// cut to ReplyMaxChars and paced by the chat's rate limits below.
	ReplyInChat bool `yaml:"reply_in_chat" json:"reply_in_chat"`
	// ReplyMaxChars cuts a reply posted in chat (at a sentence, else a
	// word); Twitch refuses messages over 500 characters.
	ReplyMaxChars int `yaml:"reply_max_chars" json:"reply_max_chars"`
	// ReplyRateMessages replies at most are posted per ReplyRateWindow
	// (Twitch: 20 per 30 s for an account that is not a moderator of the
	// channel, 100 for one that is).
	ReplyRateMessages int           `yaml:"reply_rate_messages" json:"reply_rate_messages"`
	ReplyRateWindow   time.Duration `yaml:"reply_rate_window" json:"reply_rate_window"`
	// ReplyMinInterval is the least time between two posted replies.
	ReplyMinInterval time.Duration `yaml:"reply_min_interval" json:"reply_min_interval"`
	// ReplyQueue caps the replies waiting for the rate; beyond it the
	// oldest is not posted.
	ReplyQueue int `yaml:"reply_queue" json:"reply_queue"`

	// Thanks has the character thank subscribers, raiders and cheerers.
	Thanks ThanksConfig `yaml:"thanks" json:"thanks"`

	Twitch TwitchConfig `yaml:"twitch" json:"twitch"`
}

// TwitchConfig configures the Twitch chat source (IRC over TLS).
type TwitchConfig struct {
	// Channel is the channel to read, with or without "#".
	Channel string `yaml:"channel" json:"channel"`
	// Server is host:port of Twitch's IRC server.
	Server string `yaml:"server" json:"server"`
	// TLS is on unless set to false.
	TLS *bool `yaml:"tls" json:"tls,omitempty"`
	// CAFile is a PEM file of extra certificate authorities to trust.
	CAFile string `yaml:"ca_file" json:"ca_file"`
	// Nick is the account name that goes with the token. Without a token
	// the client reads anonymously as justinfan<digits>.
	Nick string `yaml:"nick" json:"nick"`
	// Token is the OAuth token, from KOE_TWITCH_OAUTH_TOKEN only.
	Token Secret `yaml:"-" json:"-"`

	DialTimeout  time.Duration `yaml:"dial_timeout" json:"dial_timeout"`
	ReadTimeout  time.Duration `yaml:"read_timeout" json:"read_timeout"`   // no line (Twitch PINGs every ~5 min) for this long: reconnect
	WriteTimeout time.Duration `yaml:"write_timeout" json:"write_timeout"` // one line
	ReconnectMin time.Duration `yaml:"reconnect_min" json:"reconnect_min"` // first back-off after a failure
	ReconnectMax time.Duration `yaml:"reconnect_max" json:"reconnect_max"` // back-off ceiling
	MaxLineBytes int           `yaml:"max_line_bytes" json:"max_line_bytes"`
}

// CommandsConfig names the chat commands. A command is the prefix and its
// name, the first word of a message ("!ban alice"); an empty name turns
// that command off, an empty prefix all of them.
type CommandsConfig struct {
	Prefix string `yaml:"prefix" json:"prefix"`
	Skip   string `yaml:"skip" json:"skip"`
	Pause  string `yaml:"pause" json:"pause"`
	Resume string `yaml:"resume" json:"resume"`
	Clear  string `yaml:"clear" json:"clear"`
	Ban    string `yaml:"ban" json:"ban"`
	Unban  string `yaml:"unban" json:"unban"`
}

// ThanksConfig says which events start a thank-you turn, and how many
// may start per minute.
type ThanksConfig struct {
	Sub   bool `yaml:"sub" json:"sub"`     // subscriptions, renewals, gifts
	Raid  bool `yaml:"raid" json:"raid"`   // raids
	Cheer bool `yaml:"cheer" json:"cheer"` // cheers (bits)
	// MinBits is the least cheer thanked; smaller cheers are heard as
	// messages.
	MinBits int `yaml:"min_bits" json:"min_bits"`
	// MaxPerMinute caps the events thanked per minute; more are dropped
	// (a gift bomb, a raid of bots).
	MaxPerMinute int `yaml:"max_per_minute" json:"max_per_minute"`
}

// DefaultTwitchServer is Twitch's IRC endpoint.
const DefaultTwitchServer = "irc.chat.twitch.tv:6697"

// DefaultConfig returns the defaults (live chat disabled).
func DefaultConfig() Config {
	return Config{
		History:               "live",
		MaxPerMinute:          20,
		MaxPerViewerPerMinute: 3,
		MaxQueue:              50,
		MaxBanned:             1000,
		MaxBatch:              5,
		MaxMessageChars:       300,
		MaxNameChars:          40,
		IgnorePrefixes:        []string{"!"},
		ViewerFormat:          "viewer %s says: %s",
		MaxNoteChars:          300,
		NotesTimeout:          2 * time.Second,
		ActionFormat:          "viewer %s does: %s",
		MaxMessageAge:         3 * time.Minute,
		Commands: CommandsConfig{Prefix: "!", Skip: "skip", Pause: "pause", Resume: "resume",
			Clear: "clear", Ban: "ban", Unban: "unban"},
		ReplyMaxChars:     500,
		ReplyRateMessages: 20,
		ReplyRateWindow:   30 * time.Second,
		ReplyMinInterval:  time.Second,
		ReplyQueue:        5,
		Thanks:            ThanksConfig{MinBits: 1, MaxPerMinute: 3},
		Twitch:            DefaultTwitchConfig(),
	}
}

// DefaultTwitchConfig returns the Twitch defaults (no channel).
func DefaultTwitchConfig() TwitchConfig {
	return TwitchConfig{
		Server:       DefaultTwitchServer,
		DialTimeout:  10 * time.Second,
		ReadTimeout:  6 * time.Minute,
		WriteTimeout: 10 * time.Second,
		ReconnectMin: time.Second,
		ReconnectMax: 2 * time.Minute,
		MaxLineBytes: 16 << 10,
	}
}

// UseTLS reports whether TLS is on (the default).
func (c TwitchConfig) UseTLS() bool { return c.TLS == nil || *c.TLS }

// ApplyEnv reads the Twitch token from KOE_TWITCH_OAUTH_TOKEN (an "oauth:"
// prefix is accepted and removed).
func (c *Config) ApplyEnv(getenv func(string) string) {
	if tok := strings.TrimSpace(getenv(TokenEnv)); tok != "" {
		c.Twitch.Token = Secret(strings.TrimPrefix(tok, "oauth:"))
	}
}

// Validate checks the section; a disabled section is not checked.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	positive := func(key string, v int) {
		if v < 1 {
			errs = append(errs, fmt.Errorf("live_chat.%s must be at least 1, got %d", key, v))
		}
	}
	positive("max_per_minute", c.MaxPerMinute)
	positive("max_per_viewer_per_minute", c.MaxPerViewerPerMinute)
	positive("max_queue", c.MaxQueue)
	positive("max_banned", c.MaxBanned)
	positive("max_batch", c.MaxBatch)
	positive("max_message_chars", c.MaxMessageChars)
	positive("max_name_chars", c.MaxNameChars)
	if c.MaxNoteChars < 0 {
		errs = append(errs, fmt.Errorf("live_chat.max_note_chars must be 0 (no notes) or more, got %d", c.MaxNoteChars))
	}
	if c.NotesTimeout <= 0 {
		errs = append(errs, fmt.Errorf("live_chat.notes_timeout must be positive, got %s", c.NotesTimeout))
	}
	if strings.TrimSpace(c.History) == "" {
		errs = append(errs, errors.New("live_chat.history must not be empty"))
	}
	if err := checkViewerFormat(c.ViewerFormat); err != nil {
		errs = append(errs, fmt.Errorf("live_chat.viewer_format: %w", err))
	}
	for i, w := range c.WordFilter {
		if len(normWords(w)) == 0 {
			errs = append(errs, fmt.Errorf("live_chat.word_filter[%d] %q has no letters or digits", i, w))
		}
	}
	for i, p := range c.IgnorePrefixes {
		if p == "" {
			errs = append(errs, fmt.Errorf("live_chat.ignore_prefixes[%d] is empty (it would ignore every message)", i))
		}
	}
	if err := checkViewerFormat(c.ActionFormat); err != nil {
		errs = append(errs, fmt.Errorf("live_chat.action_format: %w", err))
	}
	if c.MaxMessageAge < 0 {
		errs = append(errs, fmt.Errorf("live_chat.max_message_age must be 0 (no limit) or more, got %s", c.MaxMessageAge))
	}
	errs = append(errs, c.Commands.validate())
	errs = append(errs, c.validateReply())
	if c.Thanks.MaxPerMinute < 1 {
		errs = append(errs, fmt.Errorf("live_chat.thanks.max_per_minute must be at least 1, got %d", c.Thanks.MaxPerMinute))
	}
	if c.Thanks.MinBits < 1 {
		errs = append(errs, fmt.Errorf("live_chat.thanks.min_bits must be at least 1, got %d", c.Thanks.MinBits))
	}
	if err := twitchDefaults(c.Twitch).validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// twitchMaxChars is the longest message Twitch's chat takes.
const twitchMaxChars = 500

func (c Config) validateReply() error {
	var errs []error
	if c.ReplyMaxChars < 20 || c.ReplyMaxChars > twitchMaxChars {
		errs = append(errs, fmt.Errorf("live_chat.reply_max_chars must be 20 to %d (Twitch's limit), got %d", twitchMaxChars, c.ReplyMaxChars))
	}
	if c.ReplyRateMessages < 1 {
		errs = append(errs, fmt.Errorf("live_chat.reply_rate_messages must be at least 1, got %d", c.ReplyRateMessages))
	}
	if c.ReplyRateWindow <= 0 {
		errs = append(errs, fmt.Errorf("live_chat.reply_rate_window must be positive, got %s", c.ReplyRateWindow))
	}
	if c.ReplyMinInterval < 0 {
		errs = append(errs, fmt.Errorf("live_chat.reply_min_interval must be 0 or more, got %s", c.ReplyMinInterval))
	}
	if c.ReplyQueue < 1 {
		errs = append(errs, fmt.Errorf("live_chat.reply_queue must be at least 1, got %d", c.ReplyQueue))
	}
	if c.ReplyInChat && (c.Twitch.Token == "" || strings.TrimSpace(c.Twitch.Nick) == "") {
		errs = append(errs, fmt.Errorf("live_chat.reply_in_chat posts as an account: set live_chat.twitch.nick and its OAuth token in %s", TokenEnv))
	}
	return errors.Join(errs...)
}

func (c CommandsConfig) validate() error {
	var errs []error
	if strings.ContainsFunc(c.Prefix, unicode.IsSpace) {
		errs = append(errs, fmt.Errorf("live_chat.commands.prefix %q must hold no space", c.Prefix))
	}
	seen := map[string]string{}
	for _, n := range c.names() {
		switch {
		case n.name == "":
		case strings.ContainsFunc(n.name, unicode.IsSpace):
			errs = append(errs, fmt.Errorf("live_chat.commands.%s %q must be one word", n.key, n.name))
		case seen[strings.ToLower(n.name)] != "":
			errs = append(errs, fmt.Errorf("live_chat.commands.%s %q is also live_chat.commands.%s", n.key, n.name, seen[strings.ToLower(n.name)]))
		default:
			seen[strings.ToLower(n.name)] = n.key
		}
	}
	return errors.Join(errs...)
}

func (c TwitchConfig) validate() error {
	var errs []error
	if _, err := normChannel(c.Channel); err != nil {
		errs = append(errs, fmt.Errorf("live_chat.twitch.channel: %w", err))
	}
	if c.Server == "" || !strings.Contains(c.Server, ":") {
		errs = append(errs, fmt.Errorf("live_chat.twitch.server must be host:port, got %q", c.Server))
	}
	if c.Token != "" && strings.TrimSpace(c.Nick) == "" {
		errs = append(errs, fmt.Errorf("live_chat.twitch.nick must name the account of the token in %s", TokenEnv))
	}
	if c.Nick != "" && !validNick(c.Nick) {
		errs = append(errs, fmt.Errorf("live_chat.twitch.nick %q must be letters, digits or _", c.Nick))
	}
	durs := []struct {
		key string
		v   time.Duration
	}{{"dial_timeout", c.DialTimeout}, {"read_timeout", c.ReadTimeout}, {"write_timeout", c.WriteTimeout},
		{"reconnect_min", c.ReconnectMin}, {"reconnect_max", c.ReconnectMax}}
	for _, d := range durs {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("live_chat.twitch.%s must be positive, got %s", d.key, d.v))
		}
	}
	if c.ReconnectMax < c.ReconnectMin {
		errs = append(errs, fmt.Errorf("live_chat.twitch.reconnect_max (%s) must not be below reconnect_min (%s)", c.ReconnectMax, c.ReconnectMin))
	}
	if c.MaxLineBytes < 512 || c.MaxLineBytes > 1<<20 {
		errs = append(errs, fmt.Errorf("live_chat.twitch.max_line_bytes must be 512 to %d, got %d", 1<<20, c.MaxLineBytes))
	}
	return errors.Join(errs...)
}

func checkViewerFormat(f string) error {
	n := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		if i+1 == len(f) {
			return errors.New("ends with a lone %")
		}
		switch f[i+1] {
		case '%':
		case 's':
			n++
		default:
			return fmt.Errorf("only %%s and %%%% are allowed, found %%%c", f[i+1])
		}
		i++
	}
	if n != 2 {
		return fmt.Errorf("must hold two %%s (name, then text), found %d in %q", n, f)
	}
	return nil
}

// formatViewer fills the two %s of a checked format.
func formatViewer(f, name, text string) string {
	var b strings.Builder
	args := []string{name, text}
	for i := 0; i < len(f); i++ {
		if f[i] == '%' && i+1 < len(f) {
			switch f[i+1] {
			case '%':
				b.WriteByte('%')
				i++
				continue
			case 's':
				if len(args) > 0 {
					b.WriteString(args[0])
					args = args[1:]
				}
				i++
				continue
			}
		}
		b.WriteByte(f[i])
	}
	return b.String()
}

// Secret holds a credential. It prints, logs and marshals as "[redacted]";
// Reveal returns the value.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return s.String() }

// LogValue keeps slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON keeps JSON from carrying the value.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML keeps YAML from carrying the value.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalText keeps text encoders from carrying the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
