package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// OAuth for HTTP servers, as MCP's authorization spec has it: a server
// that answers 401 names (in WWW-Authenticate, or at its well-known
// address) the authorization server that issues its tokens; koe finds that
// server's metadata, registers itself there when no client_id is
// configured, and makes a consent URL (authorization code with PKCE S256
// and the resource parameter) for the user to open. The user's browser
// comes back to koe's /oauth/callback, which hands the code to the waiting
// login; the tokens are kept in koe's store and refreshed before they
// expire, and once more on a 401. The SDK's auth package does discovery,
// registration, PKCE and the exchange; this file decides when to ask, and
// where the answer comes back.

// OAuthConfig is how koe logs in to one HTTP server.
type OAuthConfig struct {
	// ClientID is a client registered with the authorization server by
	// hand; without it koe registers one itself (RFC 7591).
	ClientID string `yaml:"client_id" json:"client_id"`
	// ClientSecret goes with ClientID for a confidential client; write it
	// as ${NAME} to keep it out of the file.
	ClientSecret string `yaml:"client_secret" json:"client_secret"`
	// Scopes replace those the server asks for.
	Scopes []string `yaml:"scopes" json:"scopes"`
}

func (o OAuthConfig) isZero() bool {
	return o.ClientID == "" && o.ClientSecret == "" && len(o.Scopes) == 0
}

func (o OAuthConfig) check(key string) error {
	if o.ClientSecret != "" && o.ClientID == "" {
		return fmt.Errorf("%s.oauth.client_secret is set without client_id", key)
	}
	for _, sc := range o.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n\"\\") {
			return fmt.Errorf("%s.oauth.scopes: %q is not a scope (no spaces or quotes)", key, sc)
		}
	}
	return nil
}

// DefaultOAuthConsentTimeout is how long a consent URL waits for the user;
// a shorter one than minConsentTimeout would expire while the user reads.
const (
	DefaultOAuthConsentTimeout = 10 * time.Minute
	minConsentTimeout          = 10 * time.Second
)

// CallbackPath is where koe takes the browser back from an authorization
// server.
const CallbackPath = "/oauth/callback"

func (c Config) checkOAuth() error {
	if c.OAuthConsentTimeout < 0 || c.OAuthConsentTimeout > 0 && c.OAuthConsentTimeout < minConsentTimeout {
		return fmt.Errorf("mcp_oauth_consent_timeout %s is out of range: 0 (%s) or at least %s", c.OAuthConsentTimeout, DefaultOAuthConsentTimeout, minConsentTimeout)
	}
	if c.OAuthRedirectURL != "" {
		u, err := url.Parse(c.OAuthRedirectURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("mcp_oauth_redirect_url %q is not an http:// or https:// URL without a query (koe's address as the browser reaches it, ending in %s)", c.OAuthRedirectURL, CallbackPath)
		}
	}
	return nil
}

func (c Config) consentTimeout() time.Duration {
	if c.OAuthConsentTimeout == 0 {
		return DefaultOAuthConsentTimeout
	}
	return c.OAuthConsentTimeout
}

// LoginStore keeps what a login to a server leaves (the client koe
// registered, its tokens), by a key naming the server and its URL. The
// data is a secret: a store must never log it.
type LoginStore interface {
	// LoadMCPLogin returns nil, nil when there is none.
	LoadMCPLogin(ctx context.Context, key string) ([]byte, error)
	SaveMCPLogin(ctx context.Context, key string, data []byte) error
	DeleteMCPLogin(ctx context.Context, key string) error
}

// memoryLogins is the store without one: logins last as long as koe runs.
type memoryLogins struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memoryLogins) LoadMCPLogin(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key], nil
}

func (s *memoryLogins) SaveMCPLogin(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[key] = data
	return nil
}

func (s *memoryLogins) DeleteMCPLogin(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

// needsLogin is a connection refused for want of a (good) token: run
// starts a login from it. It keeps what the refusal said.
type needsLogin struct {
	url    *url.URL
	status int
	header http.Header
}

func (e *needsLogin) Error() string {
	return fmt.Sprintf("the server needs authorization (HTTP %d)", e.status)
}

// login is one server's OAuth state: the transport asks it for a token for
// each request, and tells it of a 401.
type login struct {
	server   string
	key      string
	cfg      ServerConfig
	redirect func() string
	store    LoginStore
	client   *http.Client
	log      *slog.Logger
	pending  *pendingLogins
	// lost, when set, is told that the server refused the token.
	lost func()

	mu  sync.Mutex
	rec *loginRecord // nil: not logged in
	src oauth2.TokenSource
	// refreshedTo is the access token a refresh on a 401 gave: if that one
	// is refused too, refreshing again would only loop.
	refreshedTo string
}

var _ auth.OAuthHandler = (*login)(nil)

func newLogin(name string, cfg ServerConfig, redirect func() string, store LoginStore, pending *pendingLogins, log *slog.Logger) *login {
	return &login{
		server: name, key: name + " " + cfg.URL, cfg: cfg, redirect: redirect,
		store: store, pending: pending, log: log,
		client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: cfg.timeout()},
	}
}

// load reads a login kept from before, once, before the first connection.
func (l *login) load(ctx context.Context) {
	data, err := l.store.LoadMCPLogin(ctx, l.key)
	if err != nil {
		l.log.Warn("MCP login could not be read; the server will ask again", "err", err)
		return
	}
	if data == nil {
		return
	}
	rec, err := decodeLogin(data)
	if err != nil {
		l.log.Warn("MCP login kept in the store is unreadable; the server will ask again", "err", err)
		return
	}
	l.adopt(rec)
}

// adopt makes rec the login requests use.
func (l *login) adopt(rec *loginRecord) {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, l.client)
	// ReuseTokenSource refreshes a token shortly before it expires.
	src := &keptSource{l: l, base: oauth2.ReuseTokenSource(rec.Token, rec.config().TokenSource(ctx, rec.Token))}
	l.mu.Lock()
	l.rec, l.src = rec, src
	l.mu.Unlock()
}

// TokenSource is what the transport takes each request's token from.
func (l *login) TokenSource(context.Context) (oauth2.TokenSource, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.src == nil {
		return nil, nil
	}
	return l.src, nil
}

// Authorize is told of a request refused with 401 or 403: a refused token
// is refreshed once; without one that works, the connection fails with
// needsLogin, and run asks the user.
func (l *login) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if resp.StatusCode == http.StatusForbidden && !insufficientScope(challenges) {
		// Forbidden for a reason a login does not change: the request
		// is sent again and its answer is the error.
		return nil
	}
	sent := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
	l.mu.Lock()
	rec, refreshedTo := l.rec, l.refreshedTo
	l.mu.Unlock()
	if rec != nil && rec.Token.RefreshToken != "" && sent != "" && sent != refreshedTo && resp.StatusCode == http.StatusUnauthorized {
		err := l.refresh(ctx, rec)
		if err == nil {
			return nil
		}
		l.log.Info("MCP login could not be refreshed; the server needs authorization again", "err", err)
	}
	if rec != nil {
		l.forget(ctx)
	}
	if l.lost != nil {
		l.lost()
	}
	return &needsLogin{url: req.URL, status: resp.StatusCode, header: resp.Header.Clone()}
}

func insufficientScope(cs []oauthex.Challenge) bool {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["error"] == "insufficient_scope" {
			return true
		}
	}
	return false
}

// refresh trades the refresh token for a new access token at once.
func (l *login) refresh(ctx context.Context, rec *loginRecord) error {
	old := *rec.Token
	old.Expiry = time.Unix(1, 0) // expired: the source must refresh
	ctx = context.WithValue(ctx, oauth2.HTTPClient, l.client)
	tok, err := rec.config().TokenSource(ctx, &old).Token()
	if err != nil {
		return fmt.Errorf("refreshing the token at %s: %w", rec.TokenURL, err)
	}
	next := rec.with(tok)
	l.adopt(next)
	l.mu.Lock()
	l.refreshedTo = tok.AccessToken
	l.mu.Unlock()
	l.save(ctx, next)
	return nil
}

// forget drops a login the server no longer takes.
func (l *login) forget(ctx context.Context) {
	l.mu.Lock()
	l.rec, l.src, l.refreshedTo = nil, nil, ""
	l.mu.Unlock()
	if err := l.store.DeleteMCPLogin(ctx, l.key); err != nil {
		l.log.Warn("MCP login could not be removed from the store", "err", err)
	}
}

func (l *login) save(ctx context.Context, rec *loginRecord) {
	data, err := rec.encode()
	if err == nil {
		err = l.store.SaveMCPLogin(context.WithoutCancel(ctx), l.key, data)
	}
	if err != nil {
		// Requests go on with the token in memory; after a restart the
		// user is asked again.
		l.log.Warn("MCP login could not be stored", "err", err)
	}
}

// keptSource stores each token its source refreshes.
type keptSource struct {
	l    *login
	base oauth2.TokenSource
}

func (k *keptSource) Token() (*oauth2.Token, error) {
	tok, err := k.base.Token()
	if err != nil {
		return nil, err
	}
	k.l.mu.Lock()
	rec := k.l.rec
	changed := rec != nil && k.l.src == k && rec.Token.AccessToken != tok.AccessToken
	var next *loginRecord
	if changed {
		next = rec.with(tok)
		k.l.rec = next
	}
	k.l.mu.Unlock()
	if changed {
		k.l.log.Debug("MCP login refreshed", "expires", tok.Expiry)
		k.l.save(context.Background(), next)
	}
	return tok, nil
}

// ask runs one login: discovery, registration, the consent URL shown
// through shown, and the exchange once the browser comes back. It returns
// when the login is done, failed, or the consent timed out.
func (l *login) ask(ctx context.Context, nl *needsLogin, consent time.Duration, shown func(consentURL string)) error {
	redirect := l.redirect()
	hc := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:         redirect,
		Client:              l.client,
		RequestRefreshToken: true,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			return l.pending.wait(ctx, l.server, args.URL, consent, shown)
		},
		NewTokenSource: func(_ context.Context, oc *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			rec := recordOf(oc, tok)
			l.adopt(rec)
			l.save(ctx, rec)
			return oauth2.StaticTokenSource(tok), nil
		},
	}
	if len(l.cfg.OAuth.Scopes) > 0 {
		hc.ScopeFilter = func([]string) []string { return l.cfg.OAuth.Scopes }
	}
	if l.cfg.OAuth.ClientID != "" {
		cc := &oauthex.ClientCredentials{ClientID: l.cfg.OAuth.ClientID}
		if l.cfg.OAuth.ClientSecret != "" {
			cc.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: l.cfg.OAuth.ClientSecret}
		}
		hc.PreregisteredClient = cc
	} else {
		hc.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs:            []string{redirect},
			ClientName:              "koe",
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			TokenEndpointAuthMethod: "none",
		}}
	}
	h, err := auth.NewAuthorizationCodeHandler(hc)
	if err != nil {
		return fmt.Errorf("mcp_servers.%s: %w", l.server, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, nl.url.String(), nil)
	if err != nil {
		return err
	}
	resp := &http.Response{StatusCode: nl.status, Header: nl.header, Body: http.NoBody, Request: req}
	if err := h.Authorize(ctx, req, resp); err != nil {
		return fmt.Errorf("authorizing with the server's authorization server: %w", err)
	}
	return nil
}
