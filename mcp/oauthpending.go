package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"
)

// loginRecord is what koe keeps of a login: enough to refresh its token
// after a restart.
type loginRecord struct {
	ClientID     string           `json:"client_id"`
	ClientSecret string           `json:"client_secret,omitempty"`
	AuthURL      string           `json:"auth_url"`
	TokenURL     string           `json:"token_url"`
	AuthStyle    oauth2.AuthStyle `json:"auth_style"`
	Scopes       []string         `json:"scopes,omitempty"`
	Token        *oauth2.Token    `json:"token"`
}

func recordOf(oc *oauth2.Config, tok *oauth2.Token) *loginRecord {
	return &loginRecord{ClientID: oc.ClientID, ClientSecret: oc.ClientSecret, AuthURL: oc.Endpoint.AuthURL,
		TokenURL: oc.Endpoint.TokenURL, AuthStyle: oc.Endpoint.AuthStyle, Scopes: oc.Scopes, Token: tok}
}

func (r *loginRecord) config() *oauth2.Config {
	return &oauth2.Config{ClientID: r.ClientID, ClientSecret: r.ClientSecret, Scopes: r.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: r.AuthURL, TokenURL: r.TokenURL, AuthStyle: r.AuthStyle}}
}

// with is r with a new token; a refresh that brings no refresh token
// keeps the old one.
func (r *loginRecord) with(tok *oauth2.Token) *loginRecord {
	next := *r
	t := *tok
	if t.RefreshToken == "" {
		t.RefreshToken = r.Token.RefreshToken
	}
	next.Token = &t
	return &next
}

func (r *loginRecord) encode() ([]byte, error) { return json.Marshal(r) }

func decodeLogin(data []byte) (*loginRecord, error) {
	var r loginRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	if r.Token == nil || r.Token.AccessToken == "" || r.TokenURL == "" {
		return nil, errors.New("it has no token")
	}
	return &r, nil
}

// pendingLogins are the consent URLs out with users, by their state, until
// the browser comes back to the callback.
type pendingLogins struct {
	mu sync.Mutex
	m  map[string]*pendingLogin
}

type pendingLogin struct {
	server string
	code   chan *auth.AuthorizationResult
	// refused carries the authorization server's error, when the user
	// declined.
	refused chan string
}

// ErrUnknownLogin is a callback whose state koe did not hand out, or whose
// login is over.
var ErrUnknownLogin = errors.New("no login is waiting for this answer: it was finished or has expired, or the link did not come from this koe; reload koe's page for a new one")

// wait shows the consent URL and waits up to consent for the browser to
// bring the code back.
func (p *pendingLogins) wait(ctx context.Context, server, consentURL string, consent time.Duration, shown func(string)) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(consentURL)
	if err != nil {
		return nil, err
	}
	state := u.Query().Get("state")
	if state == "" {
		return nil, errors.New("the consent URL has no state")
	}
	pl := &pendingLogin{server: server, code: make(chan *auth.AuthorizationResult, 1), refused: make(chan string, 1)}
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]*pendingLogin{}
	}
	p.m[state] = pl
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.m, state)
		p.mu.Unlock()
	}()
	shown(consentURL)
	expired := time.NewTimer(consent)
	defer expired.Stop()
	select {
	case res := <-pl.code:
		return res, nil
	case reason := <-pl.refused:
		return nil, fmt.Errorf("the authorization server refused: %s", clip(reason, 200))
	case <-expired.C:
		return nil, errConsentTimeout
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var errConsentTimeout = errors.New("nobody opened the consent URL in time (mcp_oauth_consent_timeout)")

// finish hands the browser's answer to the login waiting for it, and
// returns that login's server.
func (p *pendingLogins) finish(state, code, iss, refusal string) (string, error) {
	if state == "" {
		return "", ErrUnknownLogin
	}
	p.mu.Lock()
	pl := p.m[state]
	delete(p.m, state)
	p.mu.Unlock()
	if pl == nil {
		return "", ErrUnknownLogin
	}
	if refusal != "" || code == "" {
		if refusal == "" {
			refusal = "no code in the answer"
		}
		pl.refused <- refusal
		return pl.server, nil
	}
	pl.code <- &auth.AuthorizationResult{Code: code, State: state, Iss: iss}
	return pl.server, nil
}

// loginTimeout bounds one login: the consent plus the exchange.
func loginTimeout(consent time.Duration, server ServerConfig) time.Duration {
	return consent + server.timeout()
}
