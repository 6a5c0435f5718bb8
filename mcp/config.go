// Package mcp connects koe to MCP servers, the way users add tools: stdio
// servers koe starts itself and streamable-HTTP servers it reaches by URL.
// One Manager per process keeps every configured server connected in the
// background; a character gets the tools of the servers it enables as an
// agent.Toolbox.
package mcp

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config is koe's MCP section. Its keys sit at the top level of a file, in
// the shape Open-LLM-VTuber's mcp_servers.json already has:
//
//	mcp_servers:
//	  time:
//	    command: uvx
//	    args: [mcp-server-time]
//	  search:
//	    url: http://127.0.0.1:8931/mcp
//	    headers: {Authorization: Bearer …}
type Config struct {
	// Servers maps a server's name, which prefixes its tools' names and
	// by which characters enable it, to how to reach it.
	Servers map[string]ServerConfig `yaml:"mcp_servers" json:"mcp_servers"`
	// MaxResultChars bounds what one call returns to the model, a tool
	// error's text included (0: DefaultMaxResultChars); longer results are
	// cut with a note saying so.
	MaxResultChars int `yaml:"mcp_max_result_chars" json:"mcp_max_result_chars"`
	// MaxLineBytes bounds one line a stdio server writes to stdout (0:
	// DefaultMaxLineBytes): a longer message ends the connection, which
	// is started again; a longer line of anything else is skipped.
	MaxLineBytes int `yaml:"mcp_max_line_bytes" json:"mcp_max_line_bytes"`
	// MaxDescriptionChars bounds a tool's description as the model gets
	// it (0: DefaultMaxDescriptionChars); a longer one is cut with a
	// mark. Every request carries every tool's description.
	MaxDescriptionChars int `yaml:"mcp_max_description_chars" json:"mcp_max_description_chars"`
	// MaxSchemaBytes bounds a tool's input schema (compact JSON; 0:
	// DefaultMaxSchemaBytes); a tool with a larger one is left out and
	// logged, as a schema cut short would be wrong.
	MaxSchemaBytes int `yaml:"mcp_max_schema_bytes" json:"mcp_max_schema_bytes"`
	// Resources bounds what koe takes of the servers' resources (see
	// resources.go).
	ResourceLimits `yaml:",inline"`
	// What servers may make koe show and log, and how often (see
	// HostLimits).
	HostLimits `yaml:",inline"`
	// MaxPrompts bounds the prompts listed of one server (0:
	// DefaultMaxPrompts); MaxPromptChars bounds a prompt's text and its
	// arguments (0: DefaultMaxPromptChars). See prompts.go.
	MaxPrompts     int `yaml:"mcp_max_prompts" json:"mcp_max_prompts"`
	MaxPromptChars int `yaml:"mcp_max_prompt_chars" json:"mcp_max_prompt_chars"`
	// OAuthRedirectURL is koe's callback address as the user's browser
	// reaches it, which an authorization server sends the browser back to
	// (default: http://localhost:<port>/oauth/callback, filled in by app).
	OAuthRedirectURL string `yaml:"mcp_oauth_redirect_url" json:"mcp_oauth_redirect_url"`
	// OAuthConsentTimeout bounds how long a consent URL stays good (0:
	// DefaultOAuthConsentTimeout); a new one is made after it.
	OAuthConsentTimeout time.Duration `yaml:"mcp_oauth_consent_timeout" json:"mcp_oauth_consent_timeout"`
}

// ServerConfig is one server: Command (a stdio server koe starts) or URL
// (a streamable-HTTP server), never both.
type ServerConfig struct {
	Command string   `yaml:"command" json:"command"`
	Args    []string `yaml:"args" json:"args"`
	// Env is added to the few variables a stdio server inherits (PATH,
	// HOME, …, see inheritedEnv); koe's own secrets are not passed on.
	Env map[string]string `yaml:"env" json:"env"`
	URL string            `yaml:"url" json:"url"`
	// Headers go with every HTTP request, for keys and tokens.
	Headers map[string]string `yaml:"headers" json:"headers"`
	// OAuth sets how koe logs in to an HTTP server that asks for it
	// (oauth.go); without it, a client is registered dynamically.
	OAuth OAuthConfig `yaml:"oauth" json:"oauth"`
	// Timeout bounds connecting (start, handshake, listing tools) and each
	// call (0: DefaultServerTimeout). The agent's tools.timeout bounds a
	// call too; the shorter one wins.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// Health and sampling (see ServerHost).
	ServerHost `yaml:",inline"`
}

// Defaults and bounds of the settings.
const (
	DefaultMaxResultChars = 16000
	// minResultChars leaves room for the cut note and some of the result.
	minResultChars             = 200
	DefaultServerTimeout       = 30 * time.Second
	DefaultMaxDescriptionChars = 1024
	minDescriptionChars        = 50
	DefaultMaxSchemaBytes      = 16 << 10
	minSchemaBytes             = 256
	// DefaultMaxLineBytes is the SDK's own bound on a message.
	DefaultMaxLineBytes = 16 << 20
	// A line limit holds at least a handshake and at most what a process
	// should ever be made to hold of one message.
	minLineBytes = 4 << 10
	maxLineBytes = 1 << 30
	// maxServerName keeps "<server>__" short enough that a tool's own name
	// keeps at least 30 of the 64 characters a function name may have.
	maxServerName = 32
)

var serverNameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
})

// Validate reports settings that can never work, by their keys.
func (c Config) Validate() error {
	if c.MaxResultChars < 0 || c.MaxResultChars > 0 && c.MaxResultChars < minResultChars {
		return fmt.Errorf("mcp_max_result_chars %d is out of range: 0 (%d) or at least %d", c.MaxResultChars, DefaultMaxResultChars, minResultChars)
	}
	if c.MaxLineBytes < 0 || c.MaxLineBytes > 0 && (c.MaxLineBytes < minLineBytes || c.MaxLineBytes > maxLineBytes) {
		return fmt.Errorf("mcp_max_line_bytes %d is out of range: 0 (%d) or %d to %d", c.MaxLineBytes, DefaultMaxLineBytes, minLineBytes, maxLineBytes)
	}
	if c.MaxDescriptionChars < 0 || c.MaxDescriptionChars > 0 && c.MaxDescriptionChars < minDescriptionChars {
		return fmt.Errorf("mcp_max_description_chars %d is out of range: 0 (%d) or at least %d", c.MaxDescriptionChars, DefaultMaxDescriptionChars, minDescriptionChars)
	}
	if c.MaxSchemaBytes < 0 || c.MaxSchemaBytes > 0 && c.MaxSchemaBytes < minSchemaBytes {
		return fmt.Errorf("mcp_max_schema_bytes %d is out of range: 0 (%d) or at least %d", c.MaxSchemaBytes, DefaultMaxSchemaBytes, minSchemaBytes)
	}
	if err := c.ResourceLimits.validate(); err != nil {
		return err
	}
	if err := c.HostLimits.validate(); err != nil {
		return err
	}
	if err := c.validatePrompts(); err != nil {
		return err
	}
	if err := c.checkOAuth(); err != nil {
		return err
	}
	var errs []error
	for _, name := range c.names() {
		if err := checkServer(name, c.Servers[name]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckServers reports names that are not configured servers (a
// character's list of enabled servers), or named twice.
func (c Config) CheckServers(names []string) error {
	for i, name := range names {
		if slices.Contains(names[:i], name) {
			return fmt.Errorf("MCP server %q is enabled twice", name)
		}
		if _, ok := c.Servers[name]; !ok {
			if len(c.Servers) == 0 {
				return fmt.Errorf("unknown MCP server %q: mcp_servers configures none", name)
			}
			return fmt.Errorf("unknown MCP server %q (mcp_servers has %s)", name, strings.Join(c.names(), ", "))
		}
	}
	return nil
}

// names lists the servers in a stable order, for logs and errors.
func (c Config) names() []string {
	names := make([]string, 0, len(c.Servers))
	for name := range c.Servers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (c Config) maxResultChars() int {
	if c.MaxResultChars == 0 {
		return DefaultMaxResultChars
	}
	return c.MaxResultChars
}

// limits are the bounds a server's connection keeps, defaults applied.
type limits struct {
	line, description, schema int
	res                       ResourceLimits
	host                      HostLimits
}

func (c Config) limits() limits {
	or := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	return limits{
		line:        or(c.MaxLineBytes, DefaultMaxLineBytes),
		description: or(c.MaxDescriptionChars, DefaultMaxDescriptionChars),
		schema:      or(c.MaxSchemaBytes, DefaultMaxSchemaBytes),
		res:         c.ResourceLimits.withDefaults(),
		host:        c.HostLimits.withDefaults(),
	}
}

func checkServer(name string, s ServerConfig) error {
	key := "mcp_servers." + name
	// Tool names are "<server>__<tool>": a server name without "__" and
	// not ending in "_" makes the first "__" the separator, so two servers
	// can never produce the same tool name.
	if !serverNameRE().MatchString(name) || strings.Contains(name, "__") || strings.HasSuffix(name, "_") {
		return fmt.Errorf("mcp_servers: server name %q must be 1 to %d of A-Z a-z 0-9 _ -, without \"__\" and not ending in \"_\" (it prefixes the names of its tools)", name, maxServerName)
	}
	// Values are checked as the server will get them.
	s, err := s.resolved(name)
	if err != nil {
		return err
	}
	switch {
	case s.Command == "" && s.URL == "":
		return fmt.Errorf("%s: set command (a stdio server) or url (a streamable-HTTP server)", key)
	case s.Command != "" && s.URL != "":
		return fmt.Errorf("%s: set command or url, not both", key)
	case s.Timeout < 0:
		return fmt.Errorf("%s.timeout %s is negative (default %s)", key, s.Timeout, DefaultServerTimeout)
	}
	if err := s.ServerHost.validate(key, s.URL != ""); err != nil {
		return err
	}
	if s.URL != "" {
		switch {
		case len(s.Args) > 0:
			return fmt.Errorf("%s.args: only a stdio server (command) takes args", key)
		case len(s.Env) > 0:
			return fmt.Errorf("%s.env: only a stdio server (command) takes env", key)
		}
		if err := s.OAuth.check(key); err != nil {
			return err
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.url %q is not an http:// or https:// URL", key, s.URL)
		}
		for k, v := range s.Headers {
			if !isToken(k) {
				return fmt.Errorf("%s.headers: %q is not a valid header name", key, k)
			}
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("%s.headers.%s: the value has a line break or NUL", key, k)
			}
		}
		return nil
	}
	if strings.TrimSpace(s.Command) != s.Command {
		return fmt.Errorf("%s.command %q has surrounding spaces (arguments go in args)", key, s.Command)
	}
	if len(s.Headers) > 0 {
		return fmt.Errorf("%s.headers: only an HTTP server (url) takes headers", key)
	}
	if !s.OAuth.isZero() {
		return fmt.Errorf("%s.oauth: only an HTTP server (url) logs in with OAuth", key)
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%s.env: %q is not a valid variable name", key, k)
		}
		if strings.Contains(v, "\x00") {
			return fmt.Errorf("%s.env.%s: the value has a NUL", key, k)
		}
	}
	return nil
}

// isToken reports whether s is an HTTP token (RFC 9110), as header names
// must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

func (s ServerConfig) timeout() time.Duration {
	if s.Timeout == 0 {
		return DefaultServerTimeout
	}
	return s.Timeout
}
