package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"koe/internal/quote"
)

// Who may talk to koe. Three independent checks, each aimed at one attack:
//   - Host: a page whose domain name was re-pointed at 127.0.0.1 (DNS
//     rebinding) sends its own name as Host; koe answers only to loopback
//     names, literal addresses and server.allowed_hosts.
//   - Origin: a page of another site in the user's browser sends its
//     origin; REST and the WebSocket accept only loopback origins, koe's own
//     and server.allowed_origins. Non-browsers send no Origin.
//   - Token: with server.auth_token set, every request but GET /healthz
//     and GET /readyz (probes, which learn only states) carries it, as a
//     bearer token, a cookie set by opening a page with ?token=, a query
//     parameter or a subprotocol on the WebSocket.

const (
	// tokenSubprotocolPrefix carries the token in Sec-WebSocket-Protocol,
	// the one header a browser's WebSocket lets a page set.
	tokenSubprotocolPrefix = "koe.token."
	tokenCookie            = "koe_token"
	tokenQuery             = "token"
	tokenCookieMaxAge      = 30 * 24 * time.Hour
)

const tokenHelp = "koe needs its access token (server.auth_token): send the header \"Authorization: Bearer <token>\"; " +
	"in a browser, open any koe page once with ?token=<token> added to its address; " +
	"WebSocket clients add ?token=<token> to the URL or offer the subprotocol koe.token.<token> (browsers together with koe.v1)"

// access holds the checks' settings in the form they are used.
type access struct {
	anyHost      bool
	hosts        map[string]bool
	anyOrigin    bool
	origins      map[string]bool
	tokenSum     [sha256.Size]byte
	cookieValue  string
	tokenEnabled bool
}

func newAccess(cfg Config) *access {
	a := &access{hosts: map[string]bool{}, origins: map[string]bool{}}
	for _, h := range cfg.AllowedHosts {
		if h == "*" {
			a.anyHost = true
		}
		a.hosts[normalHost(h)] = true
	}
	for _, o := range cfg.AllowedOrigins {
		if o == "*" {
			a.anyOrigin = true
		}
		a.origins[strings.ToLower(strings.TrimRight(o, "/"))] = true
	}
	if cfg.AuthToken != "" {
		a.tokenEnabled = true
		a.tokenSum = sha256.Sum256([]byte(cfg.AuthToken))
		// The cookie holds a value derived from the token rather than the
		// token, so that reading a browser's cookie jar does not give the
		// token away for use in headers and URLs.
		mac := hmac.New(sha256.New, []byte(cfg.AuthToken))
		mac.Write([]byte("koe cookie v1"))
		a.cookieValue = base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	}
	return a
}

// normalHost lower-cases a host name and drops a trailing dot.
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// splitHostPort splits a Host header or URL host into name and port,
// without brackets around IPv6 addresses; port may be "".
func splitHostPort(hp string) (host, port string) {
	if strings.HasPrefix(hp, "[") {
		end := strings.IndexByte(hp, ']')
		if end < 0 {
			return hp, ""
		}
		return hp[1:end], strings.TrimPrefix(hp[end+1:], ":")
	}
	if strings.Count(hp, ":") == 1 {
		host, port, _ = strings.Cut(hp, ":")
		return host, port
	}
	return hp, ""
}

// isLoopbackName reports names and addresses that always mean this
// machine: localhost, *.localhost (RFC 6761) and loopback addresses.
func isLoopbackName(host string) bool {
	host = normalHost(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// hostAllowed reports whether koe answers to a Host header. Any literal
// address passes: DNS rebinding needs a name.
func (a *access) hostAllowed(hostport string) bool {
	host, _ := splitHostPort(hostport)
	host = normalHost(host)
	switch {
	case host == "":
		return false
	case a.anyHost, isLoopbackName(host), a.hosts[host]:
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// originAllowed reports whether a browser page from origin may use the REST
// API and the WebSocket of koe reached as host (an allowed Host header).
func (a *access) originAllowed(origin, host string) bool {
	if origin == "" {
		return true // not a browser: native apps, scripts, OBS plugins
	}
	if a.anyOrigin || a.origins[strings.ToLower(strings.TrimRight(origin, "/"))] {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if isLoopbackName(u.Hostname()) {
		return true
	}
	return sameHost(u, host)
}

// sameHost compares an origin with a Host header, treating a missing port
// as the default one of the origin's scheme (the request may have come
// through a TLS proxy, so the Host header alone does not say which).
func sameHost(origin *url.URL, hostport string) bool {
	defaultPort := map[string]string{"http": "80", "https": "443"}[origin.Scheme]
	oport := origin.Port()
	if oport == "" {
		oport = defaultPort
	}
	host, port := splitHostPort(hostport)
	if port == "" {
		port = defaultPort
	}
	return normalHost(origin.Hostname()) == normalHost(host) && oport == port
}

// tokenMatches compares in constant time (digests, so that the length does
// not leak either).
func (a *access) tokenMatches(given string) bool {
	sum := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1
}

func (a *access) cookieMatches(given string) bool {
	return given != "" && subtle.ConstantTimeCompare([]byte(given), []byte(a.cookieValue)) == 1
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(header string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// subprotocolToken returns the token offered as a koe.token.* subprotocol.
func subprotocolToken(headers []string) string {
	return subprotocolTokenOf(headers, tokenSubprotocolPrefix)
}

// subprotocolTokenOf returns the token offered as a subprotocol of prefix.
func subprotocolTokenOf(headers []string, prefix string) string {
	for _, h := range headers {
		for _, p := range strings.Split(h, ",") {
			if tok, ok := strings.CutPrefix(strings.TrimSpace(p), prefix); ok {
				return tok
			}
		}
	}
	return ""
}

// isRoute reports whether a raw request path is route, the way fiber
// matches it (case-insensitive, with or without a trailing slash).
func isRoute(path, route string) bool {
	return strings.EqualFold(strings.TrimSuffix(path, "/"), route)
}

// tokenOK reports whether a request carries server.auth_token, or needs
// none (the probes, asset preflights); fromQuery is set when only a
// ?token= query carried it, for a page that should then get the cookie.
func (a *access) tokenOK(r head) (ok, fromQuery bool) {
	if !a.tokenEnabled {
		return true, false
	}
	path, method := r.path(), r.method()
	get := method == fiber.MethodGet || method == fiber.MethodHead
	switch {
	case get && (isRoute(path, "/healthz") || isRoute(path, "/readyz")):
		return true, false
	case get && isRoute(path, callbackRoute):
		return true, false // its state is the secret (mcpauth.go)
	case method == fiber.MethodOptions && isAssetPath(path):
		return true, false // CORS preflights never carry credentials
	case a.tokenMatches(bearer(string(r.h.Peek(fiber.HeaderAuthorization)))), a.cookieMatches(string(r.h.Cookie(tokenCookie))):
		return true, false
	}
	query := string(r.uri.QueryArgs().Peek(tokenQuery))
	if query == "" || !a.tokenMatches(query) {
		if isRoute(path, "/client-ws") || isRoute(path, realtimeRoute) {
			var protocols []string
			for k, v := range r.h.All() {
				if strings.EqualFold(string(k), fiber.HeaderSecWebSocketProtocol) {
					protocols = append(protocols, string(v))
				}
			}
			sp := subprotocolToken(protocols)
			if sp == "" && isRoute(path, realtimeRoute) {
				// The Realtime SDKs' browser form.
				sp = subprotocolTokenOf(protocols, realtimeKeySubprotocol)
			}
			return sp != "" && a.tokenMatches(sp), false
		}
		return false, false
	}
	switch {
	case isRoute(path, "/client-ws"), isRoute(path, realtimeRoute):
		return true, false
	case get:
		return true, true
	}
	return false, false
}

// tokenRefusal is the answer to a request without the token.
func tokenRefusal() *fiber.Error {
	return fiber.NewError(fiber.StatusUnauthorized, tokenHelp)
}

// setTokenCookie answers a page opened with the right ?token=: it sets the
// cookie that the page's own requests and same-origin WebSocket will carry,
// and sends the browser to the same address without the token, so that
// the token leaves the address bar and the history.
func (s *Server) setTokenCookie(c *fiber.Ctx) error {
	c.Cookie(&fiber.Cookie{
		Name:     tokenCookie,
		Value:    s.access.cookieValue,
		Path:     "/",
		MaxAge:   int(tokenCookieMaxAge / time.Second),
		HTTPOnly: true,
		SameSite: fiber.CookieSameSiteStrictMode,
		Secure:   c.Protocol() == "https",
	})
	args := fasthttp.AcquireArgs()
	defer fasthttp.ReleaseArgs(args)
	c.Request().URI().QueryArgs().CopyTo(args)
	args.Del(tokenQuery)
	// The path as requested, kept to a single leading slash so that the
	// Location cannot name another host ("//evil.example").
	loc := "/" + strings.TrimLeft(string(c.Request().URI().PathOriginal()), "/")
	if q := args.String(); q != "" {
		loc += "?" + q
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Redirect(loc, fiber.StatusSeeOther)
}

// originRefusal is the answer to a foreign web page.
func originRefusal(origin string) *fiber.Error {
	return fiber.NewError(fiber.StatusForbidden, "origin "+quote.Shorten(origin, 120)+" is not allowed: add it to server.allowed_origins")
}

// hostRefusal reports a Host header, or an absolute request target's host,
// that koe does not answer to (DNS rebinding).
func (a *access) hostRefusal(r head) *fiber.Error {
	host := string(r.h.Host())
	if host == "" {
		return fiber.NewError(fiber.StatusBadRequest, "the request has no Host header")
	}
	for _, h := range []string{host, string(r.uri.Host())} {
		if h != "" && !a.hostAllowed(h) {
			return fiber.NewError(fiber.StatusForbidden, "koe does not answer to the host name "+quote.Shorten(strings.ToLower(h), 120)+
				": add it to server.allowed_hosts if it is this machine's name (literal IP addresses and localhost always work)")
		}
	}
	return nil
}

// GuardHTTP puts next (a net/http handler served on a port of its own:
// -pprof's profiles) behind the checks koe's own port makes of every
// request: a Host name koe answers to, so that a rebound domain name
// cannot read it from the user's browser, and server.auth_token when set.
// A browser opens it once with ?token=, as koe's pages, and keeps the
// cookie (which koe's own port sets too).
func GuardHTTP(cfg Config, next http.Handler) http.Handler {
	a := newAccess(cfg)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(fiber.HeaderXContentTypeOptions, "nosniff")
		for _, h := range []string{r.Host, r.URL.Host} {
			if h != "" && !a.hostAllowed(h) || r.Host == "" {
				http.Error(w, "koe does not answer to the host name "+quote.Shorten(strings.ToLower(h), 120)+
					": add it to server.allowed_hosts if it is this machine's name", http.StatusForbidden)
				return
			}
		}
		if a.tokenEnabled {
			cookie, _ := r.Cookie(tokenCookie)
			query := r.URL.Query().Get(tokenQuery)
			switch {
			case a.tokenMatches(bearer(r.Header.Get("Authorization"))), cookie != nil && a.cookieMatches(cookie.Value):
			case query != "" && a.tokenMatches(query) && r.Method == http.MethodGet:
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: a.cookieValue, Path: "/", HttpOnly: true,
					MaxAge: int(tokenCookieMaxAge / time.Second), SameSite: http.SameSiteStrictMode})
			default:
				w.Header().Set(fiber.HeaderWWWAuthenticate, `Bearer realm="koe"`)
				http.Error(w, tokenHelp, http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
