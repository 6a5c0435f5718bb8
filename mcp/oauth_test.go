package mcp

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"koe/testkit/oauthtest"
)

// keptLogins is a LoginStore that shows what was kept.
type keptLogins struct {
	memoryLogins
}

func (c *keptLogins) kept(key string) string {
	b, _ := c.LoadMCPLogin(context.Background(), key)
	return string(b)
}

// startLoginManager starts a Manager for the fixture's server, logins kept
// in store, closed at cleanup.
func startLoginManager(t *testing.T, f *oauthtest.Server, store LoginStore) (*Manager, *recorder) {
	t.Helper()
	cfg := Config{
		Servers:          map[string]ServerConfig{"locked": {URL: f.Resource}},
		OAuthRedirectURL: "http://127.0.0.1:9/oauth/callback",
	}
	rec := newRecorder(t)
	m, err := start(context.Background(), cfg, slog.New(rec), defaultTiming, WithLoginStore(store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, rec
}

// waitConsent waits for the server to need authorization and returns its
// consent URL, as koe's status shows it.
func waitConsent(t *testing.T, m *Manager, previous string) string {
	t.Helper()
	var u string
	waitFor(t, m, "a consent URL in the status", func() bool {
		st := m.Status()
		if len(st) == 1 && st[0].State == "needs authorization" && st[0].AuthorizeURL != "" && st[0].AuthorizeURL != previous {
			u = st[0].AuthorizeURL
			return true
		}
		return false
	})
	return u
}

// approve follows the consent URL as the user's browser would and hands
// the answer to koe, as its callback does.
func approve(t *testing.T, f *oauthtest.Server, m *Manager, consentURL string) {
	t.Helper()
	back := f.Consent(consentURL)
	if got := back.Scheme + "://" + back.Host + back.Path; got != "http://127.0.0.1:9/oauth/callback" {
		t.Fatalf("the authorization server sent the browser to %s, not koe's callback", got)
	}
	q := back.Query()
	server, err := m.FinishLogin(q.Get("state"), q.Get("code"), q.Get("iss"), q.Get("error"))
	if err != nil || server != "locked" {
		t.Fatalf("FinishLogin = %q, %v", server, err)
	}
}

func TestOAuthLogin(t *testing.T) {
	f := oauthtest.Start(t)
	store := &keptLogins{}
	m, rec := startLoginManager(t, f, store)
	tb := m.Toolbox([]string{"locked"})

	consentURL := waitConsent(t, m, "")
	u, _ := url.Parse(consentURL)
	for _, p := range []string{"client_id", "code_challenge", "state"} {
		if u.Query().Get(p) == "" {
			t.Errorf("the consent URL has no %s: %s", p, consentURL)
		}
	}
	if got := u.Query().Get("resource"); got != f.Resource {
		t.Errorf("the consent URL's resource is %q, want %q", got, f.Resource)
	}
	if _, err := call(t, tb, "locked__whoami", "{}"); err == nil || !strings.Contains(err.Error(), "needs authorization") {
		t.Errorf("a call before the login: %v, want an error saying the server needs authorization", err)
	}
	if r, ok := rec.find(slog.LevelWarn, "MCP server needs authorization: open the consent URL"); !ok || r.attrs["authorize_url"] != consentURL {
		t.Errorf("the consent URL is not in the log: %+v", r)
	}
	// A callback that koe did not ask for is refused.
	if _, err := m.FinishLogin("forged", "code", "", ""); err == nil {
		t.Error("a callback with a state koe never handed out was taken")
	}

	approve(t, f, m, consentURL)
	waitForTool(t, m, tb, "locked__whoami")
	if out := mustCall(t, tb, "locked__whoami", "{}"); out != "authorized" {
		t.Fatalf("whoami = %q", out)
	}
	key := "locked " + f.Resource
	kept := store.kept(key)
	token := f.LastToken()
	if !strings.Contains(kept, token) {
		t.Errorf("the store does not hold the token in use: %s", kept)
	}
	// Tokens never reach the log.
	rec.mu.Lock()
	for _, r := range *rec.records {
		for k, v := range r.attrs {
			if strings.Contains(v, token) || strings.Contains(v, "rt-") {
				t.Errorf("log %q: %s holds a token", r.msg, k)
			}
		}
	}
	rec.mu.Unlock()

	// The access token revoked, its refresh token gets a new one on the
	// 401, and the call goes through.
	f.Revoke(false)
	if out := mustCall(t, tb, "locked__whoami", "{}"); out != "authorized" {
		t.Fatalf("whoami after the access token was revoked = %q", out)
	}
	if refreshes, _ := f.Counts(); refreshes != 1 {
		t.Errorf("refreshes = %d, want 1", refreshes)
	}
	token = f.LastToken()
	if !strings.Contains(store.kept(key), token) {
		t.Error("the refreshed token was not stored")
	}

	// Everything revoked: the server needs authorization again, with a
	// new consent URL, and the old login is gone from the store.
	f.Revoke(true)
	if _, err := call(t, tb, "locked__whoami", "{}"); err == nil {
		t.Fatal("a call with every token revoked went through")
	}
	next := waitConsent(t, m, consentURL)
	if kept := store.kept(key); kept != "" {
		t.Errorf("a refused login stays in the store: %s", kept)
	}
	approve(t, f, m, next)
	waitFor(t, m, "connected again", func() bool { return m.Status()[0].State == "connected" })
	if out := mustCall(t, tb, "locked__whoami", "{}"); out != "authorized" {
		t.Fatalf("whoami after the second login = %q", out)
	}
}

// A login kept in the store is used after a restart, without asking.
func TestOAuthLoginKept(t *testing.T) {
	f := oauthtest.Start(t)
	store := &keptLogins{}
	m, _ := startLoginManager(t, f, store)
	approve(t, f, m, waitConsent(t, m, ""))
	waitFor(t, m, "connected", func() bool { return m.Status()[0].State == "connected" })
	m.Close()

	m2, _ := startLoginManager(t, f, store)
	tb := m2.Toolbox([]string{"locked"})
	waitFor(t, m2, "connected with the kept login", func() bool {
		st := m2.Status()[0]
		if st.State == "needs authorization" {
			t.Fatalf("the restarted manager asked again: %+v", st)
		}
		return st.State == "connected"
	})
	if out := mustCall(t, tb, "locked__whoami", "{}"); out != "authorized" {
		t.Fatalf("whoami = %q", out)
	}
}

// A token about to expire is refreshed before it is sent, not after the
// server refused it.
func TestOAuthRefreshBeforeExpiry(t *testing.T) {
	f := oauthtest.Start(t)
	// Shorter than the ten seconds before expiry at which a token is
	// renewed: each is renewed before its next use.
	f.ExpiresIn = 5
	m, _ := startLoginManager(t, f, &keptLogins{})
	tb := m.Toolbox([]string{"locked"})
	approve(t, f, m, waitConsent(t, m, ""))
	waitForTool(t, m, tb, "locked__whoami")
	_, refusedBefore := f.Counts()
	mustCall(t, tb, "locked__whoami", "{}")
	refreshes, refused := f.Counts()
	if refreshes == 0 {
		t.Error("a token about to expire was not refreshed")
	}
	if refused != refusedBefore {
		t.Errorf("%d requests were refused after the login: the token was refreshed late", refused-refusedBefore)
	}
}

// The user declining at the authorization server leaves the server
// needing authorization, saying why, with a new consent URL later.
func TestOAuthDeclined(t *testing.T) {
	f := oauthtest.Start(t)
	m, _ := startLoginManager(t, f, &keptLogins{})
	consentURL := waitConsent(t, m, "")
	u, _ := url.Parse(consentURL)
	if _, err := m.FinishLogin(u.Query().Get("state"), "", "", "access_denied"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "the refusal shown", func() bool {
		st := m.Status()[0]
		return st.State == "needs authorization" && strings.Contains(st.Error, "access_denied")
	})
}

// A server that refuses koe and names no way to log in is shown as needing
// authorization, saying why, not restarted as a failing server.
func TestUnauthorizedWithoutLogin(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	})
	srv := httptest.NewServer(refuse)
	t.Cleanup(srv.Close)
	cfg := Config{Servers: map[string]ServerConfig{"closed": {URL: srv.URL + "/mcp"}}, OAuthRedirectURL: "http://127.0.0.1:9/oauth/callback"}
	m, rec := startManager(t, cfg, defaultTiming)
	waitFor(t, m, "the reason shown", func() bool {
		st := m.Status()[0]
		return st.State == "needs authorization" && st.Error != ""
	})
	if st := m.Status()[0]; st.AuthorizeURL != "" {
		t.Errorf("a consent URL for a server with no authorization server: %+v", st)
	}
	if n := rec.count(slog.LevelWarn, "MCP server failed to start; retrying"); n != 0 {
		t.Errorf("the refusal was taken for a failure to start %d times", n)
	}
	if _, err := call(t, m.Toolbox([]string{"closed"}), "closed__x", "{}"); err == nil {
		t.Error("a call to it went through")
	}
}

// A consent URL nobody opens within mcp_oauth_consent_timeout is replaced
// by a new one; the old one's answer is refused.
func TestOAuthConsentExpires(t *testing.T) {
	f := oauthtest.Start(t)
	cfg := Config{
		Servers:             map[string]ServerConfig{"locked": {URL: f.Resource}},
		OAuthRedirectURL:    "http://127.0.0.1:9/oauth/callback",
		OAuthConsentTimeout: minConsentTimeout,
	}
	m, _ := startManager(t, cfg, defaultTiming)
	first := waitConsent(t, m, "")
	second := waitConsent(t, m, first)
	old, _ := url.Parse(first)
	if _, err := m.FinishLogin(old.Query().Get("state"), "code", "", ""); err == nil {
		t.Error("the answer to an expired consent URL was taken")
	}
	approve(t, f, m, second)
	waitFor(t, m, "connected", func() bool { return m.Status()[0].State == "connected" })
}
