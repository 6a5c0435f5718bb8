package mcp

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestValidate(t *testing.T) {
	ok := ServerConfig{Command: "uvx", Args: []string{"mcp-server-time"}}
	web := ServerConfig{URL: "https://example.test/mcp", Headers: map[string]string{"Authorization": "Bearer x"}}
	for _, tc := range []struct {
		name string
		c    Config
		want string // "" = valid
	}{
		{"none", Config{}, ""},
		{"stdio and http", Config{Servers: map[string]ServerConfig{"time": ok, "web-2": web}}, ""},
		{"neither", Config{Servers: map[string]ServerConfig{"x": {}}}, "mcp_servers.x: set command (a stdio server) or url"},
		{"both", Config{Servers: map[string]ServerConfig{"x": {Command: "a", URL: "http://b"}}}, "mcp_servers.x: set command or url, not both"},
		{"bad name", Config{Servers: map[string]ServerConfig{"my server": ok}}, `server name "my server" must be`},
		{"long name", Config{Servers: map[string]ServerConfig{strings.Repeat("a", 33): ok}}, "must be 1 to 32"},
		{"double underscore", Config{Servers: map[string]ServerConfig{"a__b": ok}}, `without "__"`},
		{"trailing underscore", Config{Servers: map[string]ServerConfig{"a_": ok}}, `not ending in "_"`},
		{"negative timeout", Config{Servers: map[string]ServerConfig{"x": {Command: "a", Timeout: -time.Second}}}, "mcp_servers.x.timeout -1s is negative"},
		{"ftp", Config{Servers: map[string]ServerConfig{"x": {URL: "ftp://host/mcp"}}}, `mcp_servers.x.url "ftp://host/mcp" is not an http:// or https:// URL`},
		{"no host", Config{Servers: map[string]ServerConfig{"x": {URL: "http:///mcp"}}}, "is not an http:// or https:// URL"},
		{"args on url", Config{Servers: map[string]ServerConfig{"x": {URL: "http://h/mcp", Args: []string{"a"}}}}, "mcp_servers.x.args: only a stdio server"},
		{"env on url", Config{Servers: map[string]ServerConfig{"x": {URL: "http://h/mcp", Env: map[string]string{"A": "b"}}}}, "mcp_servers.x.env: only a stdio server"},
		{"headers on command", Config{Servers: map[string]ServerConfig{"x": {Command: "a", Headers: map[string]string{"A": "b"}}}}, "mcp_servers.x.headers: only an HTTP server"},
		{"bad header name", Config{Servers: map[string]ServerConfig{"x": {URL: "http://h/mcp", Headers: map[string]string{"Bad Name": "b"}}}}, `mcp_servers.x.headers: "Bad Name" is not a valid header name`},
		{"header line break", Config{Servers: map[string]ServerConfig{"x": {URL: "http://h/mcp", Headers: map[string]string{"A": "b\r\nEvil: 1"}}}}, "mcp_servers.x.headers.A: the value has a line break"},
		{"bad env name", Config{Servers: map[string]ServerConfig{"x": {Command: "a", Env: map[string]string{"A=B": "c"}}}}, `mcp_servers.x.env: "A=B" is not a valid variable name`},
		{"command with args in it", Config{Servers: map[string]ServerConfig{"x": {Command: " npx"}}}, `mcp_servers.x.command " npx" has surrounding spaces`},
		{"small limit", Config{MaxResultChars: 10}, "mcp_max_result_chars 10 is out of range"},
		{"negative limit", Config{MaxResultChars: -1}, "mcp_max_result_chars -1 is out of range"},
		{"small line limit", Config{MaxLineBytes: 100}, "mcp_max_line_bytes 100 is out of range"},
		{"huge line limit", Config{MaxLineBytes: 2 << 30}, "mcp_max_line_bytes 2147483648 is out of range"},
		{"line limit", Config{MaxLineBytes: 1 << 20}, ""},
	} {
		err := tc.c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// Start refuses what Validate refuses.
	if _, err := Start(t.Context(), Config{Servers: map[string]ServerConfig{"x": {}}}, nil); err == nil {
		t.Error("Start took an invalid config")
	}
}

func TestCheckServers(t *testing.T) {
	c := Config{Servers: map[string]ServerConfig{"time": {Command: "a"}, "web": {URL: "http://h/mcp"}}}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"web", "time"}, ""},
		{[]string{"wbe"}, `unknown MCP server "wbe" (mcp_servers has time, web)`},
		{[]string{"time", "time"}, `MCP server "time" is enabled twice`},
	} {
		err := c.CheckServers(tc.names)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
			t.Errorf("%v: %v, want %q", tc.names, err, tc.want)
		}
	}
	if err := (Config{}).CheckServers([]string{"x"}); err == nil || err.Error() != `unknown MCP server "x": mcp_servers configures none` {
		t.Errorf("no servers: %v", err)
	}
}

// The YAML users write, Open-LLM-VTuber's keys plus url, headers and
// timeout, decodes into Config.
func TestConfigYAML(t *testing.T) {
	const file = `
mcp_servers:
  time:
    command: uvx
    args: ["mcp-server-time", "--local-timezone=Europe/Paris"]
    env: {TZ_DEBUG: "1"}
    timeout: 45s
  search:
    url: http://127.0.0.1:8931/mcp
    headers: {Authorization: "Bearer abc"}
mcp_max_result_chars: 8000
`
	var c Config
	if err := yaml.Unmarshal([]byte(file), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tm, search := c.Servers["time"], c.Servers["search"]
	if tm.Command != "uvx" || len(tm.Args) != 2 || tm.Env["TZ_DEBUG"] != "1" || tm.Timeout != 45*time.Second || tm.timeout() != 45*time.Second {
		t.Errorf("time = %+v", tm)
	}
	if search.URL != "http://127.0.0.1:8931/mcp" || search.Headers["Authorization"] != "Bearer abc" || search.timeout() != DefaultServerTimeout {
		t.Errorf("search = %+v", search)
	}
	if c.maxResultChars() != 8000 || (Config{}).maxResultChars() != DefaultMaxResultChars {
		t.Errorf("max result chars: %d", c.maxResultChars())
	}
}
