package mcp

import (
	"context"
	"errors"
	"slices"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"koe/protocol"
)

// serverAuth is an HTTP server's login as its run loop and koe's status
// see it.
type serverAuth struct {
	login   *login
	consent Config
	loaded  sync.Once
	// lost tells a connected session that the server refused koe's
	// token and no refresh helped.
	lost chan struct{}

	mu sync.Mutex
	// url is the consent URL out with the user; reason why none could be
	// made.
	url, reason string
}

// attachAuth gives an HTTP server its login.
func (m *Manager) attachAuth(s *server, o options) {
	if s.cfg.URL == "" {
		return
	}
	a := &serverAuth{consent: m.cfg, lost: make(chan struct{}, 1)}
	redirect := func() string { return m.cfg.OAuthRedirectURL }
	if m.cfg.OAuthRedirectURL == "" && o.callback != nil {
		redirect = o.callback
	}
	a.login = newLogin(s.name, s.cfg, redirect, o.logins, m.logins, s.log)
	a.login.lost = func() {
		select {
		case a.lost <- struct{}{}:
		default:
		}
	}
	s.auth = a
}

// authorizeLink has the SDK's transport take its tokens from the login,
// kept from before on the first connection.
func (s *server) authorizeLink(l *link) {
	if s.auth == nil {
		return
	}
	s.auth.loaded.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.timeout())
		defer cancel()
		s.auth.login.load(ctx)
	})
	if t, ok := l.transport.Transport.(*sdk.StreamableClientTransport); ok {
		t.OAuthHandler = s.auth.login
	}
}

// loginNeeded is the refusal in err that a login answers, or nil.
func (s *server) loginNeeded(err error) *needsLogin {
	var nl *needsLogin
	if s.auth == nil || !errors.As(err, &nl) {
		return nil
	}
	return nl
}

// errLoginLost ends a session whose server stopped taking koe's token.
var errLoginLost = errors.New("the server no longer takes koe's token")

// loginLost is watched by serve: a signal when the server stops taking
// the token (nil for stdio, which never signals).
func (s *server) loginLost() <-chan struct{} {
	if s.auth == nil {
		return nil
	}
	return s.auth.lost
}

// askLogin shows a consent URL (koe's status, the log) and waits for the
// user's browser to come back with the code, then exchanges it. It
// returns errConsentTimeout when nobody came in time.
func (s *server) askLogin(ctx context.Context, nl *needsLogin) error {
	a := s.auth
	// A signal from the session just ended is stale.
	select {
	case <-a.lost:
	default:
	}
	if a.login.redirect() == "" {
		err := errors.New("koe's callback address is unknown: set mcp_oauth_redirect_url")
		a.show("", err.Error())
		s.set(stateNeedsLogin, nil, nil, nil)
		return err
	}
	a.show("", "")
	s.set(stateNeedsLogin, nil, nil, nil)
	ctx, cancel := context.WithTimeout(ctx, loginTimeout(a.consent.consentTimeout(), s.cfg))
	defer cancel()
	err := a.login.ask(ctx, nl, a.consent.consentTimeout(), func(consentURL string) {
		a.show(consentURL, "")
		s.log.Warn("MCP server needs authorization: open the consent URL", "authorize_url", consentURL)
		s.changed()
	})
	switch {
	case err == nil:
		a.show("", "")
		s.log.Info("MCP server authorized")
	case errors.Is(err, errConsentTimeout):
		s.log.Info("MCP server's consent URL expired unused; making a new one")
	case ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded):
		a.show("", err.Error())
		s.log.Warn("MCP server needs authorization, which failed", "err", err)
		s.changed()
	}
	return err
}

func (a *serverAuth) show(url, reason string) {
	a.mu.Lock()
	a.url, a.reason = url, reason
	a.mu.Unlock()
}

// Status lists the configured servers and where each stands, with the
// consent URL of one that needs authorization.
func (m *Manager) Status() []protocol.MCPServer {
	if m == nil {
		return []protocol.MCPServer{}
	}
	out := make([]protocol.MCPServer, 0, len(m.servers))
	for _, name := range m.cfg.names() {
		s := m.servers[name]
		s.mu.Lock()
		st := protocol.MCPServer{Name: name, State: s.state.String(), Tools: len(s.tools)}
		s.mu.Unlock()
		if s.auth != nil && st.State == stateNeedsLogin.String() {
			s.auth.mu.Lock()
			st.AuthorizeURL, st.Error = s.auth.url, s.auth.reason
			s.auth.mu.Unlock()
		}
		out = append(out, st)
	}
	return out
}

// FinishLogin takes the browser's return to koe's callback: the state koe
// handed out, and the code (or the authorization server's error). It
// returns the server whose login it was; the exchange goes on in the
// background, and the server connects when it is done.
func (m *Manager) FinishLogin(state, code, iss, refusal string) (string, error) {
	if m == nil {
		return "", ErrUnknownLogin
	}
	return m.logins.finish(state, code, iss, refusal)
}

// Option changes how Start runs the servers.
type Option func(*options)

type options struct {
	logins   LoginStore
	callback func() string
}

// WithLoginStore keeps the servers' OAuth logins in ls (koe's store);
// without it they last as long as the process.
func WithLoginStore(ls LoginStore) Option {
	return func(o *options) {
		if ls != nil {
			o.logins = ls
		}
	}
}

// WithCallbackURL gives koe's callback address when
// mcp_oauth_redirect_url is not set: url is asked at each login, as koe
// may not listen yet when Start runs ("" while unknown).
func WithCallbackURL(url func() string) Option {
	return func(o *options) { o.callback = url }
}

// ReportStatus calls report with Status whenever it changes, from a
// goroutine of the Manager's that ends with it; report must not block for
// long (it holds up the next report, nothing else).
func (m *Manager) ReportStatus(report func([]protocol.MCPServer)) {
	if m == nil || len(m.servers) == 0 {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		last := m.Status()
		for {
			changed := m.watch()
			if st := m.Status(); !slices.Equal(st, last) {
				last = st
				report(st)
			}
			select {
			case <-changed:
			case <-m.ctx.Done():
				return
			}
		}
	}()
}
