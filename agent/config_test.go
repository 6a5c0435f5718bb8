package agent_test

import (
	"strings"
	"testing"
	"time"

	"koe/agent"
)

func TestConfigValidate(t *testing.T) {
	def := agent.DefaultConfig()
	if err := def.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	if def.ContextWindow != agent.DefaultContextWindow || !def.StreamUsage {
		t.Errorf("default context_window %d, stream_usage %v; want %d, true", def.ContextWindow, def.StreamUsage, agent.DefaultContextWindow)
	}
	// The smallest window koe accepts.
	if err := (agent.Config{BaseURL: "http://h:8080/v1", Model: "m", ContextWindow: 512}).Validate(); err != nil {
		t.Errorf("context_window 512 rejected: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  agent.Config
		want string
	}{
		{"no scheme", agent.Config{BaseURL: "127.0.0.1:11434/v1", Model: "m", ContextWindow: 4096}, "base_url"},
		{"ftp", agent.Config{BaseURL: "ftp://h/v1", Model: "m", ContextWindow: 4096}, "base_url"},
		{"no host", agent.Config{BaseURL: "http:///v1", Model: "m", ContextWindow: 4096}, "base_url"},
		{"no scheme", agent.Config{BaseURL: "127.0.0.1:11434/v1", Model: "m", ContextWindow: 4096}, "base_url"},
		{"host as scheme", agent.Config{BaseURL: "localhost:11434/v1", Model: "m", ContextWindow: 4096}, "base_url"},
		{"http without a port", agent.Config{BaseURL: "http://127.0.0.1/v1", Model: "m", ContextWindow: 4096}, "names no port"},
		{"empty", agent.Config{Model: "m", ContextWindow: 4096}, "base_url"},
		{"no model", agent.Config{BaseURL: "http://h:8080/v1", ContextWindow: 4096}, "KOE_LLM_MODEL"},
		{"no context window", agent.Config{BaseURL: "http://h:8080/v1", Model: "m"}, "context_window"},
		{"context window 511", agent.Config{BaseURL: "http://h:8080/v1", Model: "m", ContextWindow: 511}, "context_window"},
		{"negative idle", agent.Config{BaseURL: "http://h:8080/v1", Model: "m", ContextWindow: 4096, IdleTimeout: -time.Second}, "idle_timeout"},
		{"negative max_tools", agent.Config{BaseURL: "http://h:8080/v1", Model: "m", ContextWindow: 4096, MaxTools: -1}, "llm.max_tools -1 is out of range"},
		{"huge max_tools", agent.Config{BaseURL: "http://h:8080/v1", Model: "m", ContextWindow: 4096, MaxTools: 5000}, "llm.max_tools 5000 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// llm.max_reply_tokens bounds a reply; the older max_tokens key still
// works, and the explicit new key wins over it.
func TestReplyTokenLimit(t *testing.T) {
	base := agent.Config{BaseURL: "http://h:8080/v1", Model: "m", ContextWindow: 4096}
	for _, tc := range []struct {
		name            string
		maxReply, maxTk int
		want            int
		invalid         string // the key the error must name
	}{
		{"default", 0, 0, agent.DefaultMaxReplyTokens, ""},
		{"max_reply_tokens", 300, 0, 300, ""},
		{"max_tokens (older key)", 0, 500, 500, ""},
		{"both: max_reply_tokens wins", 300, 500, 300, ""},
		{"smallest", agent.MinReplyTokens, 0, agent.MinReplyTokens, ""},
		{"max_reply_tokens too small", agent.MinReplyTokens - 1, 0, agent.MinReplyTokens - 1, "llm.max_reply_tokens"},
		{"max_reply_tokens negative", -5, 500, -5, "llm.max_reply_tokens"},
		{"max_tokens too small", 0, 8, 8, "llm.max_tokens"},
		{"a small max_tokens under a good max_reply_tokens", 64, 8, 64, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			c.MaxReplyTokens, c.MaxTokens = tc.maxReply, tc.maxTk
			if got := c.ReplyTokenLimit(); got != tc.want {
				t.Errorf("ReplyTokenLimit() = %d, want %d", got, tc.want)
			}
			err := c.Validate()
			switch {
			case tc.invalid == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.invalid != "" && (err == nil || !strings.Contains(err.Error(), tc.invalid)):
				t.Errorf("Validate() = %v, want an error naming %s", err, tc.invalid)
			}
		})
	}
	if agent.DefaultConfig().ReplyTokenLimit() != 4096 {
		t.Errorf("default limit %d, want 4096", agent.DefaultConfig().ReplyTokenLimit())
	}
}

// What koe reads of the LLM server is bounded by four keys: 0 means the
// default, and a limit too small for a real server's answers is refused
// at start, by name.
func TestReadLimits(t *testing.T) {
	base := agent.Config{BaseURL: "http://h:8080/v1", Model: "m", ContextWindow: 4096}
	if got, want := base.ReadLimits(), (agent.ReadLimits{Line: 1 << 20, Delta: 64 << 10, ErrorBody: 4 << 10, Response: 8 << 20}); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	set := base
	set.MaxLineBytes, set.MaxDeltaBytes, set.MaxErrorBytes, set.MaxResponseBytes = 4096, 1024, 256, 64<<10
	if err := set.Validate(); err != nil {
		t.Errorf("the least limits: %v", err)
	}
	if got, want := set.ReadLimits(), (agent.ReadLimits{Line: 4096, Delta: 1024, ErrorBody: 256, Response: 64 << 10}); got != want {
		t.Errorf("set %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		key string
		set func(*agent.Config)
	}{
		{"llm.max_line_bytes 4095 is too small: at least 4096 bytes", func(c *agent.Config) { c.MaxLineBytes = 4095 }},
		{"llm.max_delta_bytes -1 is too small", func(c *agent.Config) { c.MaxDeltaBytes = -1 }},
		{"llm.max_error_bytes 255 is too small: at least 256 bytes", func(c *agent.Config) { c.MaxErrorBytes = 255 }},
		{"llm.max_response_bytes 1000 is too small: at least 65536 bytes", func(c *agent.Config) { c.MaxResponseBytes = 1000 }},
	} {
		c := base
		tc.set(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("Validate() = %v, want %q", err, tc.key)
		}
	}
}
