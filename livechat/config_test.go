package livechat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestDefaultConfigValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("disabled default: %v", err)
	}
	c.Enabled = true
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "live_chat.twitch.channel") {
		t.Fatalf("enabled without a channel: %v", err)
	}
	c.Twitch.Channel = "#somechannel"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesKeys(t *testing.T) {
	cases := map[string]func(*Config){
		"live_chat.max_per_minute must be at least 1":            func(c *Config) { c.MaxPerMinute = 0 },
		"live_chat.max_per_viewer_per_minute must be at least 1": func(c *Config) { c.MaxPerViewerPerMinute = -1 },
		"live_chat.max_queue":                                    func(c *Config) { c.MaxQueue = 0 },
		"live_chat.max_batch":                                    func(c *Config) { c.MaxBatch = 0 },
		"live_chat.max_message_chars":                            func(c *Config) { c.MaxMessageChars = 0 },
		"live_chat.max_name_chars":                               func(c *Config) { c.MaxNameChars = 0 },
		"live_chat.max_note_chars":                               func(c *Config) { c.MaxNoteChars = -1 },
		"live_chat.notes_timeout":                                func(c *Config) { c.NotesTimeout = 0 },
		"live_chat.history":                                      func(c *Config) { c.History = " " },
		"live_chat.viewer_format: must hold two %s":              func(c *Config) { c.ViewerFormat = "%s said" },
		"live_chat.viewer_format: only %s":                       func(c *Config) { c.ViewerFormat = "%d %s %s" },
		"live_chat.word_filter[1]":                               func(c *Config) { c.WordFilter = []string{"ok", "!!"} },
		"live_chat.ignore_prefixes[0]":                           func(c *Config) { c.IgnorePrefixes = []string{""} },
		"live_chat.twitch.read_timeout":                          func(c *Config) { c.Twitch.ReadTimeout = -1 },
	}
	for want, mod := range cases {
		c := DefaultConfig()
		c.Enabled = true
		c.Twitch.Channel = "koe"
		mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

func TestViewerFormat(t *testing.T) {
	if got := formatViewer("100%% %s: %s", "Al", "hi %s"); got != "100% Al: hi %s" {
		t.Fatalf("got %q", got)
	}
	if err := checkViewerFormat("[%s] %s"); err != nil {
		t.Fatal(err)
	}
}

func TestYAMLAndEnv(t *testing.T) {
	c := DefaultConfig()
	src := `
enabled: true
max_per_minute: 7
blocklist: [nightbot]
notes_timeout: 750ms
twitch:
  channel: koe
  tls: false
  read_timeout: 1m
  token: from-yaml-is-ignored
`
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	if c.MaxPerMinute != 7 || c.MaxQueue != 50 || c.NotesTimeout.Milliseconds() != 750 || c.Twitch.UseTLS() || c.Twitch.ReadTimeout.Minutes() != 1 || c.Twitch.Token != "" {
		t.Fatalf("decoded %+v", c)
	}
	c.ApplyEnv(func(k string) string {
		if k == TokenEnv {
			return " oauth:abc123 "
		}
		return ""
	})
	if c.Twitch.Token.Reveal() != "abc123" {
		t.Fatalf("token %q", c.Twitch.Token.Reveal())
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "live_chat.twitch.nick") {
		t.Fatalf("token without nick: %v", err)
	}
}

func TestSecretRedacted(t *testing.T) {
	c := DefaultConfig()
	c.Twitch.Token = "hunter2"
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	log.Info("cfg", "token", c.Twitch.Token, "twitch", c.Twitch)
	jlog := slog.New(slog.NewJSONHandler(&logged, nil))
	jlog.Info("cfg", "token", c.Twitch.Token, "cfg", c)
	j, err := json.Marshal(map[string]any{"t": c.Twitch.Token, "cfg": c})
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(map[string]any{"t": c.Twitch.Token, "cfg": c})
	if err != nil {
		t.Fatal(err)
	}
	all := logged.String() + string(j) + string(y) +
		fmt.Sprintf("%v %+v %#v %s %v", c, c, c, c.Twitch.Token, c.Twitch.Token)
	if strings.Contains(all, "hunter2") {
		t.Fatalf("token leaked:\n%s", all)
	}
	if !strings.Contains(all, redacted) {
		t.Fatalf("no redaction mark:\n%s", all)
	}
}

func TestCleanText(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"  a \n\r\t b  ", 100, "a b"},
		{"a\x00b\x1bc\u200bd\u202ee", 100, "abcde"},
		{"bad \xff utf8", 100, "bad utf8"},
		{"日本語のテキスト", 4, "日本語の"},
		{"abc defgh", 4, "abc"},
		{"abc defgh", 5, "abc d"},
	}
	for _, c := range cases {
		if got := cleanText(c.in, c.max); got != c.want {
			t.Errorf("cleanText(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
	if got := cleanName(" Ünïcode Name\n: says ", 40); got != "Ünïcode_Name__says" {
		t.Errorf("cleanName = %q", got)
	}
}

func TestWordFilter(t *testing.T) {
	f := newWordFilter([]string{"Heck", "spoiler alert"})
	for text, want := range map[string]bool{
		"what the heck":          true,
		"HECK!":                  true,
		"ＨＥＣＫ":                   true,
		"hėck":                   true,
		"he\u200dck":             true,
		"heckle":                 false,
		"check":                  false,
		"SPOILER, alert: x dies": true,
		"spoiler alerts":         false,
		"":                       false,
	} {
		if got := f.match(text); got != want {
			t.Errorf("match(%q) = %v, want %v", text, got, want)
		}
	}
}
