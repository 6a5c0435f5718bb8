package server_test

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koe/config"
	"koe/server"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*server.Config)
		wants []string // "" for valid
	}{
		{"defaults", func(*server.Config) {}, nil},
		{"localhost", func(c *server.Config) { c.Host = "localhost" }, nil},
		{"ipv6 loopback", func(c *server.Config) { c.Host = "::1" }, nil},
		{"all interfaces", func(c *server.Config) { c.Host = "0.0.0.0" }, []string{"server.auth_token", "server.insecure_no_auth", "KOE_AUTH_TOKEN"}},
		{"empty host", func(c *server.Config) { c.Host = "" }, []string{"server.auth_token"}},
		{"lan address", func(c *server.Config) { c.Host = "192.168.1.2" }, []string{"server.auth_token"}},
		{"host name", func(c *server.Config) { c.Host = "koe.lan" }, []string{"server.auth_token"}},
		{"all interfaces with token", func(c *server.Config) { c.Host = "0.0.0.0"; c.AuthToken = "0123456789abcdef" }, nil},
		{"all interfaces, insecure", func(c *server.Config) { c.Host = "::"; c.InsecureNoAuth = true }, nil},
		{"short token", func(c *server.Config) { c.AuthToken = "short" }, []string{"server.auth_token", "too short"}},
		{"token with a space", func(c *server.Config) { c.AuthToken = "0123456789 abcdef" }, []string{"server.auth_token"}},
		{"token with a comma", func(c *server.Config) { c.AuthToken = "0123456789,abcdef" }, []string{"server.auth_token"}},
		{"negative max_connections", func(c *server.Config) { c.MaxConnections = -1 }, []string{"server.max_connections"}},
		{"zero read_timeout", func(c *server.Config) { c.ReadTimeout = 0 }, []string{"timeouts"}},
		{"zero idle_timeout", func(c *server.Config) { c.IdleTimeout = 0 }, []string{"timeouts"}},
		{"host with scheme", func(c *server.Config) { c.AllowedHosts = []string{"https://koe.example.org"} }, []string{"server.allowed_hosts"}},
		{"host with port", func(c *server.Config) { c.AllowedHosts = []string{"koe.example.org:443"} }, []string{"server.allowed_hosts"}},
		{"hosts", func(c *server.Config) { c.AllowedHosts = []string{"koe.example.org", "*", "::1"} }, nil},
	} {
		cfg := server.DefaultConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		if len(tc.wants) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, w := range tc.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not mention %s", tc.name, err, w)
			}
		}
	}
}

// KOE_AUTH_TOKEN overrides the file, and counts for the exposure check.
func TestAuthTokenFromEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.yaml")
	if err := os.WriteFile(path, []byte("server:\n  host: 0.0.0.0\n  auth_token: from-the-file-0123456789\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(token string) func(string) string {
		return func(k string) string {
			if k == server.EnvAuthToken {
				return token
			}
			return ""
		}
	}
	cfg, err := config.Load(path, true, env("from-the-env-0123456789"))
	if err != nil || cfg.Server.AuthToken != "from-the-env-0123456789" {
		t.Fatalf("Load = %q, %v; want the env's token", cfg.Server.AuthToken, err)
	}
	if cfg, err = config.Load(path, true, env("")); err != nil || cfg.Server.AuthToken != "from-the-file-0123456789" {
		t.Fatalf("Load without the env = %q, %v", cfg.Server.AuthToken, err)
	}
	if err := os.WriteFile(path, []byte("server:\n  host: 0.0.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path, true, env("")); err == nil {
		t.Fatal("0.0.0.0 without a token loaded")
	}
	if _, err := config.Load(path, true, env("from-the-env-0123456789")); err != nil {
		t.Fatalf("0.0.0.0 with the env's token: %v", err)
	}
}

// exposedListener pretends to listen on a LAN address; it never accepts.
type exposedListener struct{}

func (exposedListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (exposedListener) Close() error              { return nil }
func (exposedListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 12393}
}

// Serve checks the address it really listens on: a -host flag applied
// after the configuration was validated cannot open koe to the network.
func TestServeRefusesExposureWithoutToken(t *testing.T) {
	var logs bytes.Buffer
	opts := server.Options{Config: server.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	err := server.New(opts).Serve(exposedListener{})
	if err == nil || !strings.Contains(err.Error(), "server.auth_token") || !strings.Contains(err.Error(), "server.insecure_no_auth") {
		t.Fatalf("Serve on a LAN address without a token: %v", err)
	}
	opts.Config.InsecureNoAuth = true
	if err := server.New(opts).Serve(exposedListener{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "WITHOUT AUTHENTICATION") {
		t.Fatalf("no loud warning for insecure_no_auth:\n%s", logs.String())
	}
}
