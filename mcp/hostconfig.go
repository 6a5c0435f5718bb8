package mcp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// HostLimits bound what servers make koe show the model, the session's
// clients and the log: a server is outside koe's trust, and each of these
// is something it could send without end.
type HostLimits struct {
	// MaxImages is how many images of one tool result a model that sees
	// images gets (0: DefaultMaxImages); the rest are named only.
	MaxImages int `yaml:"mcp_max_images" json:"mcp_max_images"`
	// MaxImageBytes bounds one such image, decoded (0:
	// DefaultMaxImageBytes).
	MaxImageBytes int `yaml:"mcp_max_image_bytes" json:"mcp_max_image_bytes"`
	// ProgressInterval is the least time between two progress reports of
	// a call shown to clients (0: DefaultProgressInterval); those between
	// are dropped, the last one of a call shown when it is due.
	ProgressInterval time.Duration `yaml:"mcp_progress_interval" json:"mcp_progress_interval"`
	// LogPerMinute is how many of a server's log messages
	// (notifications/message) koe's log takes in a minute (0:
	// DefaultLogPerMinute); the others are counted, and the count logged.
	LogPerMinute int `yaml:"mcp_log_per_minute" json:"mcp_log_per_minute"`
	// MaxLogChars bounds one such message (0: DefaultMaxLogChars).
	MaxLogChars int `yaml:"mcp_max_log_chars" json:"mcp_max_log_chars"`
}

// ServerHost is what one server may ask of koe besides its tools, and how
// its health is watched.
type ServerHost struct {
	// Cwd is a stdio server's working directory: an absolute path to a
	// directory ("": koe's own).
	Cwd string `yaml:"cwd" json:"cwd"`
	// PingInterval is how often a connected server is pinged (0:
	// DefaultPingInterval); one that does not answer within its timeout
	// is taken for hung and restarted.
	PingInterval time.Duration `yaml:"ping_interval" json:"ping_interval"`
	// Sampling lets the server ask the model of the character whose call
	// it is serving for a completion (sampling/createMessage); off by
	// default, and then koe does not offer it.
	Sampling bool `yaml:"sampling" json:"sampling"`
	// SamplingPerMinute and SamplingTokensPerMinute are the server's
	// budget of such requests and of the tokens they spend (prompt and
	// reply) over any minute (0: the defaults); a request over either is
	// refused with an error the server gets.
	SamplingPerMinute       int `yaml:"sampling_requests_per_minute" json:"sampling_requests_per_minute"`
	SamplingTokensPerMinute int `yaml:"sampling_tokens_per_minute" json:"sampling_tokens_per_minute"`
	// SamplingMaxTokens caps the reply length a request may ask for (0:
	// DefaultSamplingMaxTokens).
	SamplingMaxTokens int `yaml:"sampling_max_tokens" json:"sampling_max_tokens"`
}

// Defaults and bounds of the host settings.
const (
	DefaultMaxImages        = 4
	maxMaxImages            = 32
	DefaultMaxImageBytes    = 4 << 20
	minImageBytes           = 1 << 10
	maxImageBytes           = 32 << 20
	DefaultProgressInterval = time.Second
	maxProgressInterval     = time.Minute
	DefaultLogPerMinute     = 60
	DefaultMaxLogChars      = 1000
	minLogChars             = 100

	DefaultPingInterval = 30 * time.Second
	minPingInterval     = time.Second

	DefaultSamplingPerMinute       = 10
	DefaultSamplingTokensPerMinute = 20000
	DefaultSamplingMaxTokens       = 1024
)

func (h HostLimits) validate() error {
	switch {
	case h.MaxImages < 0 || h.MaxImages > maxMaxImages:
		return fmt.Errorf("mcp_max_images %d is out of range: 0 (%d) to %d", h.MaxImages, DefaultMaxImages, maxMaxImages)
	case h.MaxImageBytes < 0 || h.MaxImageBytes > 0 && (h.MaxImageBytes < minImageBytes || h.MaxImageBytes > maxImageBytes):
		return fmt.Errorf("mcp_max_image_bytes %d is out of range: 0 (%d) or %d to %d", h.MaxImageBytes, DefaultMaxImageBytes, minImageBytes, maxImageBytes)
	case h.ProgressInterval < 0 || h.ProgressInterval > maxProgressInterval:
		return fmt.Errorf("mcp_progress_interval %s is out of range: 0 (%s) to %s", h.ProgressInterval, DefaultProgressInterval, maxProgressInterval)
	case h.LogPerMinute < 0:
		return fmt.Errorf("mcp_log_per_minute %d is negative (default %d)", h.LogPerMinute, DefaultLogPerMinute)
	case h.MaxLogChars < 0 || h.MaxLogChars > 0 && h.MaxLogChars < minLogChars:
		return fmt.Errorf("mcp_max_log_chars %d is out of range: 0 (%d) or at least %d", h.MaxLogChars, DefaultMaxLogChars, minLogChars)
	}
	return nil
}

// hostLimits is HostLimits with the defaults applied.
func (h HostLimits) withDefaults() HostLimits {
	or := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	h.MaxImages = or(h.MaxImages, DefaultMaxImages)
	h.MaxImageBytes = or(h.MaxImageBytes, DefaultMaxImageBytes)
	h.LogPerMinute = or(h.LogPerMinute, DefaultLogPerMinute)
	h.MaxLogChars = or(h.MaxLogChars, DefaultMaxLogChars)
	if h.ProgressInterval == 0 {
		h.ProgressInterval = DefaultProgressInterval
	}
	return h
}

func (h ServerHost) validate(key string, remote bool) error {
	switch {
	case h.PingInterval < 0 || h.PingInterval > 0 && h.PingInterval < minPingInterval:
		return fmt.Errorf("%s.ping_interval %s is out of range: 0 (%s) or at least %s", key, h.PingInterval, DefaultPingInterval, minPingInterval)
	case h.SamplingPerMinute < 0:
		return fmt.Errorf("%s.sampling_requests_per_minute %d is negative (default %d)", key, h.SamplingPerMinute, DefaultSamplingPerMinute)
	case h.SamplingTokensPerMinute < 0:
		return fmt.Errorf("%s.sampling_tokens_per_minute %d is negative (default %d)", key, h.SamplingTokensPerMinute, DefaultSamplingTokensPerMinute)
	case h.SamplingMaxTokens < 0:
		return fmt.Errorf("%s.sampling_max_tokens %d is negative (default %d)", key, h.SamplingMaxTokens, DefaultSamplingMaxTokens)
	}
	if h.Cwd == "" {
		return nil
	}
	if remote {
		return fmt.Errorf("%s.cwd: only a stdio server (command) takes cwd", key)
	}
	// The directory is checked when the config is read, so that a typo
	// is an error at start rather than a server that keeps failing.
	if !filepath.IsAbs(h.Cwd) || strings.Contains(h.Cwd, "\x00") || filepath.Clean(h.Cwd) != h.Cwd {
		return fmt.Errorf("%s.cwd %q must be a clean absolute path", key, h.Cwd)
	}
	fi, err := os.Stat(h.Cwd)
	if err != nil {
		return fmt.Errorf("%s.cwd: %w", key, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s.cwd %q is not a directory", key, h.Cwd)
	}
	return nil
}

func (h ServerHost) pingInterval() time.Duration {
	if h.PingInterval == 0 {
		return DefaultPingInterval
	}
	return h.PingInterval
}

// samplingBudget is the server's sampling settings with the defaults
// applied.
func (h ServerHost) samplingBudget() (perMinute, tokensPerMinute, maxTokens int) {
	perMinute, tokensPerMinute, maxTokens = h.SamplingPerMinute, h.SamplingTokensPerMinute, h.SamplingMaxTokens
	if perMinute == 0 {
		perMinute = DefaultSamplingPerMinute
	}
	if tokensPerMinute == 0 {
		tokensPerMinute = DefaultSamplingTokensPerMinute
	}
	if maxTokens == 0 {
		maxTokens = DefaultSamplingMaxTokens
	}
	return perMinute, tokensPerMinute, maxTokens
}
