package agent

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"koe/internal/modelhttp"
)

// Config is one character's LLM connection. Every OpenAI-compatible server
// works: Ollama (http://127.0.0.1:11434/v1), llama.cpp server
// (http://127.0.0.1:8080/v1), vLLM, OpenAI itself.
type Config struct {
	BaseURL     string   `yaml:"base_url"`
	APIKey      string   `yaml:"api_key"`
	Model       string   `yaml:"model"`
	Temperature *float32 `yaml:"temperature"`
	// MaxReplyTokens bounds one reply (0: DefaultMaxReplyTokens). It is
	// sent as max_tokens, and koe also counts the streamed reply itself and
	// stops it past the limit: a model that never emits its stop token
	// would otherwise stream until the client leaves.
	MaxReplyTokens int `yaml:"max_reply_tokens"`
	// MaxTokens is the older name of MaxReplyTokens, still read so that
	// existing config files keep working; max_reply_tokens wins when both
	// are set.
	MaxTokens int `yaml:"max_tokens"`
	// IdleTimeout bounds the wait for the first token and between two
	// streamed chunks, so a hung LLM server ends the turn with an error
	// instead of leaving the client "Thinking..." forever.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ContextWindow is the model's context in tokens: koe fits every
	// request into it (less a 5% margin), dropping the oldest turns first.
	ContextWindow int `yaml:"context_window"`
	// StreamUsage asks the server to report token usage at the end of a
	// stream (stream_options.include_usage); koe calibrates its own counts
	// with it. Turn it off for a server that rejects the option.
	StreamUsage bool `yaml:"stream_usage"`
	// Vision: the model accepts images (llava, qwen2.5-vl, gpt-4o…).
	// When false, images are not sent; the model is told one was shared.
	Vision bool `yaml:"vision"`
	// MaxCycles bounds the LLM calls of one turn when the character has
	// tools (0: DefaultMaxCycles): a cycle that calls tools is followed by
	// another with their results, and the last allowed one must answer.
	MaxCycles int `yaml:"max_cycles"`
	// The server may be broken or hostile: what koe reads of its answers
	// is bounded as it is read, so that one endless line or error page
	// cannot take koe's memory (0: the Default of each).
	//
	// MaxLineBytes bounds one line of a streamed reply. Lines that are not
	// events (comments, notices) count together against it too, since
	// they are all kept for a possible error message.
	MaxLineBytes int `yaml:"max_line_bytes"`
	// MaxDeltaBytes bounds one streamed delta: its text, or its tool
	// call's name and arguments. A real delta is a token or a few.
	MaxDeltaBytes int `yaml:"max_delta_bytes"`
	// MaxErrorBytes is how much of an error answer koe reads; the rest is
	// cut off, marked "…".
	MaxErrorBytes int `yaml:"max_error_bytes"`
	// MaxResponseBytes bounds a whole answer that is not streamed (a
	// summary, the model list read at start).
	MaxResponseBytes int `yaml:"max_response_bytes"`
	// MaxTools bounds the tool definitions sent in one request (0:
	// DefaultMaxTools). When a character has more, koe's own tools go
	// first, then each MCP server's in the order of tools.mcp_servers;
	// the rest are left out, and the log says which.
	MaxTools int `yaml:"max_tools"`
}

// What koe reads of the LLM server's answers: the default of each limit,
// and the least it may be set to (an answer a real server sends must fit).
const (
	DefaultMaxLineBytes     = 1 << 20
	MinMaxLineBytes         = 4 << 10
	DefaultMaxDeltaBytes    = 64 << 10
	MinMaxDeltaBytes        = 1 << 10
	DefaultMaxErrorBytes    = 4 << 10
	MinMaxErrorBytes        = 256
	DefaultMaxResponseBytes = 8 << 20
	MinMaxResponseBytes     = 64 << 10
)

// ReadLimits are the byte limits on what koe reads of one server's
// answers, with the defaults filled in.
type ReadLimits struct {
	Line, Delta, ErrorBody, Response int
}

// ReadLimits returns the configured read limits, defaults for the unset.
func (c Config) ReadLimits() ReadLimits {
	return ReadLimits{
		Line:      orDefault(c.MaxLineBytes, DefaultMaxLineBytes),
		Delta:     orDefault(c.MaxDeltaBytes, DefaultMaxDeltaBytes),
		ErrorBody: orDefault(c.MaxErrorBytes, DefaultMaxErrorBytes),
		Response:  orDefault(c.MaxResponseBytes, DefaultMaxResponseBytes),
	}
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// checkReadLimits reports a read limit set below what a real server's
// answers need.
func (c Config) checkReadLimits() error {
	for _, l := range []struct {
		key               string
		value, least, def int
	}{
		{"llm.max_line_bytes", c.MaxLineBytes, MinMaxLineBytes, DefaultMaxLineBytes},
		{"llm.max_delta_bytes", c.MaxDeltaBytes, MinMaxDeltaBytes, DefaultMaxDeltaBytes},
		{"llm.max_error_bytes", c.MaxErrorBytes, MinMaxErrorBytes, DefaultMaxErrorBytes},
		{"llm.max_response_bytes", c.MaxResponseBytes, MinMaxResponseBytes, DefaultMaxResponseBytes},
	} {
		if err := modelhttp.CheckSetting(l.key, l.value, l.least, l.def); err != nil {
			return err
		}
	}
	return nil
}

// Cycle bounds: the default of llm.max_cycles and the most it may be.
const (
	DefaultMaxCycles = 6
	MaxMaxCycles     = 20
)

// Cycles is the most LLM calls one turn may make.
func (c Config) Cycles() int {
	if c.MaxCycles == 0 {
		return DefaultMaxCycles
	}
	return c.MaxCycles
}

// Tool count bounds: the default of llm.max_tools (what OpenAI's API
// takes at most) and the most it may be.
const (
	DefaultMaxTools = 128
	MaxMaxTools     = 1024
)

// ToolLimit is the most tool definitions one request may carry.
func (c Config) ToolLimit() int {
	if c.MaxTools == 0 {
		return DefaultMaxTools
	}
	return c.MaxTools
}

// Reply length bounds: the default of llm.max_reply_tokens, and the least
// it may be (a reply must hold at least a short sentence).
const (
	DefaultMaxReplyTokens = 4096
	MinReplyTokens        = 16
)

// ReplyTokenLimit is the most tokens one reply may have: max_reply_tokens,
// else the older max_tokens, else DefaultMaxReplyTokens.
func (c Config) ReplyTokenLimit() int {
	switch {
	case c.MaxReplyTokens != 0:
		return c.MaxReplyTokens
	case c.MaxTokens != 0:
		return c.MaxTokens
	}
	return DefaultMaxReplyTokens
}

// DefaultConfig points at a local Ollama, the most common set-up.
func DefaultConfig() Config {
	return Config{
		BaseURL:       "http://127.0.0.1:11434/v1",
		Model:         "qwen2.5:7b",
		IdleTimeout:   60 * time.Second,
		ContextWindow: DefaultContextWindow,
		StreamUsage:   true,
	}
}

// Validate reports settings that can never work.
func (c Config) Validate() error {
	if err := CheckBaseURL("llm.base_url", c.BaseURL); err != nil {
		return err
	}
	if c.Model == "" {
		return errors.New("llm.model is empty: set it in the config file or KOE_LLM_MODEL")
	}
	if c.ContextWindow < 512 {
		return fmt.Errorf("llm.context_window %d is too small (at least 512 tokens)", c.ContextWindow)
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("llm.idle_timeout %s is negative", c.IdleTimeout)
	}
	if c.MaxCycles < 0 || c.MaxCycles > MaxMaxCycles {
		return fmt.Errorf("llm.max_cycles %d is out of range: 1 to %d LLM calls per turn (default %d)", c.MaxCycles, MaxMaxCycles, DefaultMaxCycles)
	}
	if c.MaxTools < 0 || c.MaxTools > MaxMaxTools {
		return fmt.Errorf("llm.max_tools %d is out of range: 1 to %d tool definitions per request (default %d)", c.MaxTools, MaxMaxTools, DefaultMaxTools)
	}
	if n := c.ReplyTokenLimit(); n < MinReplyTokens {
		key := "llm.max_reply_tokens"
		if c.MaxReplyTokens == 0 {
			key = "llm.max_tokens"
		}
		return fmt.Errorf("%s %d is too small: a reply needs at least %d tokens (default %d)", key, n, MinReplyTokens, DefaultMaxReplyTokens)
	}
	return c.checkReadLimits()
}

// CheckBaseURL reports an OpenAI-compatible base URL, the value of key in
// the config file, that can never work.
func CheckBaseURL(key, baseURL string) error {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("%s %q is not an http(s) URL with a host (example: http://127.0.0.1:11434/v1)", key, baseURL)
	}
	// A local server always listens on its own port (Ollama 11434,
	// llama.cpp 8080, vLLM 8000); a plain http URL without one is almost
	// always a typo that would only show up at the first request.
	if u.Scheme == "http" && u.Port() == "" {
		return fmt.Errorf("%s %q names no port: write it, e.g. http://%s:11434/v1 for Ollama (or :80 if you mean port 80)", key, baseURL, u.Hostname())
	}
	return nil
}
