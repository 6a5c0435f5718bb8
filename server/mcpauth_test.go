package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"koe/app"
	"koe/config"
	"koe/mcp"
	"koe/protocol"
	"koe/testkit/logwatch"
	"koe/testkit/oauthtest"
)

// mcpLogHandler keeps koe's log as text, for a test that checks what never
// reaches it, and tells logwatch of each message.
type mcpLogHandler struct {
	watch *logwatch.Handler
	mu    *sync.Mutex
	buf   *bytes.Buffer
	text  slog.Handler
}

func newMCPLogHandler(t *testing.T) *mcpLogHandler {
	h := &mcpLogHandler{watch: logwatch.New(t, "koe"), mu: &sync.Mutex{}, buf: &bytes.Buffer{}}
	h.text = slog.NewTextHandler(lockedWriter{h}, &slog.HandlerOptions{Level: slog.LevelDebug})
	return h
}

type lockedWriter struct{ h *mcpLogHandler }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.h.buf.Write(p)
}

func (h *mcpLogHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *mcpLogHandler) Handle(ctx context.Context, r slog.Record) error {
	_ = h.text.Handle(ctx, r)
	return h.watch.Handle(ctx, r)
}
func (h *mcpLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.text = h.text.WithAttrs(as)
	return &c
}
func (h *mcpLogHandler) WithGroup(string) slog.Handler { return h }

func (h *mcpLogHandler) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.String()
}

// startMCPKoe starts koe with its log in h.
func startMCPKoe(t *testing.T, cfg config.Config, h *mcpLogHandler) *app.Main {
	t.Helper()
	m := &app.Main{Config: cfg, Logger: slog.New(h), Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// mcpStatus reads GET /api/mcp/servers with the token.
func mcpStatus(t *testing.T, addr string) []protocol.MCPServer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/mcp/servers", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	r := exchange(t, req)
	if r.status != http.StatusOK {
		t.Fatalf("GET /api/mcp/servers = %d %s", r.status, r.body)
	}
	var st []protocol.MCPServer
	r.json(t, &st)
	return st
}

// The whole login through a real koe with server.auth_token set: the
// consent URL in /api/mcp/servers, the user's browser (no cookie of
// koe's) sent from the authorization server back to koe's callback, the
// server connected; the login kept in koe.db across a restart, and never
// in the log.
func TestMCPOAuthThroughKoe(t *testing.T) {
	f := oauthtest.Start(t)
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = testToken
	cfg.MCP.Servers = map[string]mcp.ServerConfig{"locked": {URL: f.Resource}}
	logs := newMCPLogHandler(t)
	m := startMCPKoe(t, cfg, logs)
	addr := m.Addr()

	logs.watch.WaitFor("MCP server needs authorization: open the consent URL", 1)
	if r := rawGet(t, addr, "/api/mcp/servers", addr); r.status != http.StatusUnauthorized {
		t.Errorf("GET /api/mcp/servers without the token = %d", r.status)
	}
	st := mcpStatus(t, addr)
	if len(st) != 1 || st[0].Name != "locked" || st[0].State != "needs authorization" || st[0].AuthorizeURL == "" {
		t.Fatalf("status = %+v", st)
	}
	consent, _ := url.Parse(st[0].AuthorizeURL)
	if want := "http://" + addr + "/oauth/callback"; consent.Query().Get("redirect_uri") != want {
		t.Errorf("redirect_uri = %q, want koe's callback %q", consent.Query().Get("redirect_uri"), want)
	}

	// The browser: it follows the authorization server's redirect to
	// koe, carrying no token.
	var callback string
	browser := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		callback = req.URL.String()
		return nil
	}}
	resp, err := browser.Get(st[0].AuthorizeURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Logged in to MCP server locked") {
		t.Fatalf("koe's callback answered %d %s", resp.StatusCode, body)
	}
	logs.watch.WaitFor("MCP server connected", 1)
	if st := mcpStatus(t, addr); st[0].State != "connected" || st[0].Tools != 1 || st[0].AuthorizeURL != "" {
		t.Errorf("status after the login = %+v", st)
	}

	// The same answer again: its state was for one login only.
	u, _ := url.Parse(callback)
	if r := rawGet(t, addr, u.RequestURI(), addr); r.status != http.StatusBadRequest || !strings.Contains(r.body, "no login is waiting") {
		t.Errorf("the callback replayed = %d %s", r.status, r.body)
	}
	// A Host koe does not answer to is refused before the state is read.
	if r := rawGet(t, addr, u.RequestURI(), "evil.example"); r.status != http.StatusForbidden {
		t.Errorf("the callback with a foreign Host = %d", r.status)
	}
	if log := logs.String(); strings.Contains(log, f.LastToken()) || strings.Contains(log, "rt-") {
		t.Error("a token reached koe's log")
	}

	// After a restart the login kept in koe.db is used: no new consent.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	again := newMCPLogHandler(t)
	m2 := startMCPKoe(t, cfg, again)
	again.watch.WaitFor("MCP server connected", 1)
	if n := again.watch.Count("MCP server needs authorization: open the consent URL"); n != 0 {
		t.Errorf("koe asked again after a restart (%d consent URLs)", n)
	}
	var names []string
	for _, s := range mcpStatus(t, m2.Addr()) {
		names = append(names, s.Name+" "+s.State)
	}
	if b, _ := json.Marshal(names); string(b) != `["locked connected"]` {
		t.Errorf("status after the restart = %s", b)
	}
}
