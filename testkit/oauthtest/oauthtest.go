// Package oauthtest is an OAuth authorization server written for koe's
// tests (RFC 8414 metadata, RFC 7591 registration, authorization code with
// PKCE S256 and the resource parameter, refresh) in front of an MCP server
// over streamable HTTP that takes only its bearer tokens, both on
// 127.0.0.1:0: what a login to an MCP server meets, with nothing faked
// below HTTP.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is the authorization server and the MCP server behind it. Its
// MCP server has one tool, whoami, which answers "authorized".
type Server struct {
	t      testing.TB
	as, rs string // base URLs
	// Resource is the MCP endpoint, as the resource parameter must name
	// it: the URL to configure.
	Resource string
	// ExpiresIn is the lifetime of the access tokens it issues, in
	// seconds; set it before the first login.
	ExpiresIn int

	mu        sync.Mutex
	clients   map[string][]string // client_id → redirect_uris
	codes     map[string]authCode
	access    map[string]bool // valid access tokens
	refresh   map[string]bool
	refreshes int // refresh_token grants served
	refused   int // MCP requests refused with 401
	lastToken string
}

type authCode struct {
	client, redirect, challenge, resource string
}

// Start serves both until the test ends.
func Start(t testing.TB) *Server {
	f := &Server{t: t, ExpiresIn: 3600, clients: map[string][]string{}, codes: map[string]authCode{},
		access: map[string]bool{}, refresh: map[string]bool{}}
	asMux := http.NewServeMux()
	asMux.HandleFunc("GET /.well-known/oauth-authorization-server", f.metadata)
	asMux.HandleFunc("POST /register", f.register)
	asMux.HandleFunc("GET /authorize", f.authorize)
	asMux.HandleFunc("POST /token", f.token)
	f.as = serveOn(t, asMux)

	srv := sdk.NewServer(&sdk.Implementation{Name: "locked", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "whoami", Description: "Says which token the call came with."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, struct{}, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "authorized"}}}, struct{}{}, nil
		})
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	rsMux := http.NewServeMux()
	rsMux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": f.Resource, "authorization_servers": []string{f.as}, "scopes_supported": []string{"tools"}})
	})
	rsMux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		ok := f.access[tok]
		if !ok {
			f.refused++
		} else {
			f.lastToken = tok
		}
		f.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="tools"`, f.rs))
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	f.rs = serveOn(t, rsMux)
	f.Resource = f.rs + "/mcp"
	return f
}

func serveOn(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, code, why string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": why})
}

func (f *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"issuer":                                f.as,
		"authorization_endpoint":                f.as + "/authorize",
		"token_endpoint":                        f.as + "/token",
		"registration_endpoint":                 f.as + "/register",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"none"},
		"scopes_supported":                      []string{"tools", "offline_access"},
	})
}

func (f *Server) register(w http.ResponseWriter, r *http.Request) {
	var meta struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(r.Body).Decode(&meta); err != nil || len(meta.RedirectURIs) == 0 {
		oauthError(w, "invalid_client_metadata", "redirect_uris are required")
		return
	}
	id := "client-" + rand.Text()
	f.mu.Lock()
	f.clients[id] = meta.RedirectURIs
	f.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, map[string]any{"client_id": id, "redirect_uris": meta.RedirectURIs, "token_endpoint_auth_method": "none"})
}

// authorize is the consent page, consenting at once: it checks the
// request as an authorization server must and sends the browser back with
// a code.
func (f *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	redirects, known := f.clients[q.Get("client_id")]
	f.mu.Unlock()
	switch {
	case !known:
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	case !slices.Contains(redirects, q.Get("redirect_uri")):
		http.Error(w, "redirect_uri is not registered", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code":
		http.Error(w, "response_type must be code", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE with S256 is required", http.StatusBadRequest)
		return
	case q.Get("resource") != f.Resource:
		http.Error(w, fmt.Sprintf("resource %q is not %q", q.Get("resource"), f.Resource), http.StatusBadRequest)
		return
	case q.Get("state") == "":
		http.Error(w, "state is required", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	f.mu.Lock()
	f.codes[code] = authCode{client: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), resource: q.Get("resource")}
	f.mu.Unlock()
	back, _ := url.Parse(q.Get("redirect_uri"))
	v := back.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (f *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, "invalid_request", err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		c, ok := f.codes[r.PostForm.Get("code")]
		delete(f.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case !ok:
			oauthError(w, "invalid_grant", "unknown or used code")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge:
			oauthError(w, "invalid_grant", "code_verifier does not match the code_challenge")
			return
		case r.PostForm.Get("client_id") != c.client || r.PostForm.Get("redirect_uri") != c.redirect:
			oauthError(w, "invalid_grant", "client_id or redirect_uri differ from the authorization request")
			return
		case r.PostForm.Get("resource") != c.resource:
			oauthError(w, "invalid_target", "resource differs from the authorization request")
			return
		}
	case "refresh_token":
		if !f.refresh[r.PostForm.Get("refresh_token")] {
			oauthError(w, "invalid_grant", "unknown or revoked refresh token")
			return
		}
		f.refreshes++
	default:
		oauthError(w, "unsupported_grant_type", r.PostForm.Get("grant_type"))
		return
	}
	access, refresh := "at-"+rand.Text(), "rt-"+rand.Text()
	f.access[access], f.refresh[refresh] = true, true
	if rt := r.PostForm.Get("refresh_token"); rt != "" {
		delete(f.refresh, rt) // rotated
	}
	writeJSON(w, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": f.ExpiresIn, "refresh_token": refresh})
}

// Revoke makes every access token issued so far invalid; with refreshToo,
// the refresh tokens too.
func (f *Server) Revoke(refreshToo bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.access)
	if refreshToo {
		clear(f.refresh)
	}
}

// Counts are the refresh grants served and the MCP requests refused with
// 401.
func (f *Server) Counts() (refreshes, refused int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refreshes, f.refused
}

// Consent plays the user's browser: it opens the consent URL and returns
// where the authorization server sends it back to, without following.
func (f *Server) Consent(consentURL string) *url.URL {
	f.t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(consentURL)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		f.t.Fatalf("consent URL %s answered %s", consentURL, resp.Status)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		f.t.Fatal(err)
	}
	return back
}

// LastToken is the access token of the last MCP request let through.
func (f *Server) LastToken() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastToken
}

// Grant makes token a valid access token, as one handed out by hand.
func (f *Server) Grant(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.access[token] = true
}
