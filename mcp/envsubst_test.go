package mcp

import (
	"strings"
	"testing"

	"koe/testkit/oauthtest"
)

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cret", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct{ in, want, err string }{
		{"Bearer ${TOKEN}", "Bearer s3cret", ""},
		{"${TOKEN}${TOKEN}", "s3cret" + "s3cret", ""},
		{"${EMPTY}", "", ""},
		{"plain $TOKEN and $", "plain $TOKEN and $", ""},
		{"literal $${TOKEN}", "literal ${TOKEN}", ""},
		{"${MISSING}", "", "environment variable MISSING is not set"},
		{"${TOKEN", "", `without a closing "}"`},
		{"${1X}", "", "is not a variable name"},
		{"${}", "", "is not a variable name"},
	} {
		got, err := expandEnv(tc.in, lookup)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("expandEnv(%q) error = %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("expandEnv(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
		}
	}
}

// A variable a header or env value names must be set: the error names
// the key and the variable.
func TestValidateEnvSubstitution(t *testing.T) {
	t.Setenv("KOE_TEST_MCP_TOKEN", "abc")
	ok := Config{Servers: map[string]ServerConfig{
		"web":  {URL: "http://h/mcp", Headers: map[string]string{"Authorization": "Bearer ${KOE_TEST_MCP_TOKEN}"}},
		"tool": {Command: "x", Env: map[string]string{"KEY": "${KOE_TEST_MCP_TOKEN}"}},
	}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]ServerConfig{
		"mcp_servers.web.headers.Authorization: environment variable KOE_TEST_MCP_UNSET is not set": {URL: "http://h/mcp", Headers: map[string]string{"Authorization": "Bearer ${KOE_TEST_MCP_UNSET}"}},
		"mcp_servers.web.env.KEY: environment variable KOE_TEST_MCP_UNSET is not set":               {Command: "x", Env: map[string]string{"KEY": "${KOE_TEST_MCP_UNSET}"}},
		"mcp_servers.web.oauth.client_secret: environment variable KOE_TEST_MCP_UNSET is not set":   {URL: "http://h/mcp", OAuth: OAuthConfig{ClientID: "koe", ClientSecret: "${KOE_TEST_MCP_UNSET}"}},
	} {
		err := Config{Servers: map[string]ServerConfig{"web": c}}.Validate()
		if err == nil || err.Error() != name {
			t.Errorf("error = %v, want %q", err, name)
		}
	}
	t.Setenv("KOE_TEST_MCP_BREAK", "x\r\nEvil: 1")
	err := Config{Servers: map[string]ServerConfig{"web": {URL: "http://h/mcp", Headers: map[string]string{"A": "${KOE_TEST_MCP_BREAK}"}}}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "mcp_servers.web.headers.A: the value has a line break") {
		t.Errorf("a variable with a line break in a header: %v", err)
	}
}

// The value a server gets is the variable's, never the ${NAME} text.
func TestEnvSubstitutionReachesServers(t *testing.T) {
	t.Setenv("KOE_TEST_MCP_TOKEN", "from-the-environment")
	f := oauthtest.Start(t)
	f.Grant("from-the-environment")
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{
		"web":  {URL: f.Resource, Headers: map[string]string{"Authorization": "Bearer ${KOE_TEST_MCP_TOKEN}"}},
		"test": {Command: testServer, Env: map[string]string{"KOE_MCP_TEST": "${KOE_TEST_MCP_TOKEN}"}},
	}}, defaultTiming)
	tb := m.Toolbox([]string{"web", "test"})
	waitForTool(t, m, tb, "web__whoami")
	if got := mustCall(t, tb, "web__whoami", "{}"); got != "authorized" {
		t.Errorf("whoami = %q", got)
	}
	waitForTool(t, m, tb, "test__env")
	if got := mustCall(t, tb, "test__env", `{"name":"KOE_MCP_TEST"}`); got != "from-the-environment" {
		t.Errorf("the stdio server's KOE_MCP_TEST = %q", got)
	}
}
