package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"koe/agent"
)

// state is where a server's connection stands.
type state int

const (
	stateStarting   state = iota // first attempt under way
	stateConnected               // tools listed, calls go through
	stateRestarting              // failed or disconnected; waiting to try again
	stateStopped                 // the Manager closed
	stateNeedsLogin              // waiting for the user to authorize koe (oauthrun.go)
)

func (s state) String() string {
	return [...]string{"starting", "connected", "restarting", "stopped", "needs authorization"}[s]
}

// tool is one of a server's tools as the model sees it.
type tool struct {
	spec agent.ToolSpec // Name is the namespaced name
	name string         // the server's own name for it
}

// timing paces reconnects. Tests replace wait to hold a restart.
type timing struct {
	// firstDelay is the wait before the first retry; each failure doubles
	// it up to maxDelay.
	firstDelay, maxDelay time.Duration
	// stableAfter is how long a connection must have lasted for the next
	// failure to start again from firstDelay, so that a server that dies
	// right after each start is not restarted at full rate.
	stableAfter time.Duration
	wait        func(ctx context.Context, d time.Duration) error
}

var defaultTiming = timing{
	firstDelay:  500 * time.Millisecond,
	maxDelay:    30 * time.Second,
	stableAfter: time.Minute,
	wait:        sleep,
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// server keeps one configured server connected: run owns the connection;
// calls take the session under mu and use it without the lock.
type server struct {
	name    string
	cfg     ServerConfig
	log     *slog.Logger
	client  *sdk.Client
	limits  limits
	changed func() // tells the Manager's watchers
	// relist asks run to list the tools again (tools/list_changed).
	relist chan struct{}
	// asking are the askers of the calls under way (elicit.go).
	asking askers
	// subs are the resources followed, woken by their updates.
	subs subscriptions
	// host is what the server asks of koe besides calls (host.go).
	host *hostState

	mu      sync.Mutex
	state   state
	session *sdk.ClientSession
	// live ends when the session does: calls under way then end too,
	// rather than hold up closing it.
	live  context.Context
	tools []tool

	// rootsMu orders SetRoots calls; roots are the URIs last set.
	rootsMu sync.Mutex
	roots   []string
	// auth is the OAuth login of an HTTP server (nil for stdio).
	auth *serverAuth
}

func newServer(name string, cfg ServerConfig, lim limits, log *slog.Logger, changed func()) *server {
	s := &server{
		name:    name,
		cfg:     cfg,
		limits:  lim,
		log:     log.With("mcp_server", name),
		changed: changed,
		relist:  make(chan struct{}, 1),
	}
	s.host = newHostState(cfg.ServerHost, lim.host)
	s.client = sdk.NewClient(&sdk.Implementation{Name: "koe", Version: "1"}, s.clientOptions())
	return s
}

// clientOptions are the capabilities and handlers koe offers the server.
// Each feature a host offers (roots, sampling, elicitation, logging…)
// adds its own in its own file, called from here.
func (s *server) clientOptions() *sdk.ClientOptions {
	opts := &sdk.ClientOptions{
		// Only what koe offers is advertised: an empty set instead of
		// the SDK's default roots capability, to which features add.
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			// The SDK calls this on the connection's goroutine: ask run,
			// and never block it.
			select {
			case s.relist <- struct{}{}:
			default:
			}
		},
	}
	s.addElicitation(opts)
	s.resourceOptions(opts)
	s.hostOptions(opts)
	addRoots(opts.Capabilities)
	return opts
}

// run keeps the server connected until ctx ends: a server that fails to
// start or goes away is tried again after a delay that doubles up to a
// cap. Each change of state is logged once, not each retry.
func (s *server) run(ctx context.Context, t timing) {
	defer s.set(stateStopped, nil, nil, nil)
	delay := t.firstDelay
	failing := false
	for {
		l, session, tools, err := s.connect(ctx)
		if ctx.Err() != nil {
			return
		}
		if nl := s.loginNeeded(err); nl != nil {
			// Not a failure to retry: the user is asked, and koe
			// connects again once they answered.
			if err = s.askLogin(ctx, nl); ctx.Err() != nil {
				return
			}
			switch {
			case err == nil:
				delay, failing = t.firstDelay, false
				continue
			case errors.Is(err, errConsentTimeout):
				continue // a fresh consent URL
			}
			// No login could be offered (askLogin said why): the
			// state stays "needs authorization", tried again slowly.
			if t.wait(ctx, t.maxDelay) != nil {
				return
			}
			continue
		}
		if err != nil {
			s.set(stateRestarting, nil, nil, nil)
			if !failing {
				s.log.Warn("MCP server failed to start; retrying", "err", err, "retry_in", delay)
				failing = true
			} else {
				s.log.Debug("MCP server failed to start again", "err", err, "retry_in", delay)
			}
		} else {
			failing = false
			began := time.Now()
			live, endCalls := context.WithCancel(ctx)
			s.set(stateConnected, session, live, tools)
			// Said once its tools are offered: whoever reads it (an
			// operator, a test) finds them there.
			s.log.Info("MCP server connected", "tools", len(tools))
			err = s.serve(ctx, session, l, endCalls)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errLoginLost) {
				// Not a failure: connecting again meets the 401
				// that asks for a login.
				s.log.Info("MCP server no longer takes koe's token; asking for a login again")
				continue
			}
			if time.Since(began) >= t.stableAfter {
				delay = t.firstDelay
			}
			s.log.Warn("MCP server disconnected; restarting", "err", err, "restart_in", delay)
		}
		if err := t.wait(ctx, delay); err != nil {
			return
		}
		delay = min(2*delay, t.maxDelay)
	}
}

// connect starts (or reaches) the server, does the handshake and lists the
// tools, within the server's timeout. On error nothing is left running.
func (s *server) connect(ctx context.Context) (*link, *sdk.ClientSession, []tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	defer cancel()
	l, err := startLink(s.cfg, s.limits.line, s.log)
	if err != nil {
		return nil, nil, nil, err
	}
	s.authorizeLink(l)
	session, err := s.client.Connect(ctx, l.transport, nil)
	if err == nil {
		var tools []tool
		if tools, err = s.listTools(ctx, session); err == nil {
			return l, session, tools, nil
		}
		_ = session.Close()
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s (mcp_servers.%s.timeout): %w", s.cfg.timeout(), s.name, err)
	}
	if exit := l.close(); exit != "" {
		err = fmt.Errorf("%w (process: %s)", err, exit)
	}
	return nil, nil, nil, s.withStderr(err, l.lastStderr())
}

// withStderr adds a stdio server's last words to err.
func (s *server) withStderr(err error, stderr string) error {
	if stderr != "" {
		err = fmt.Errorf("%w; its stderr said: %s", err, clip(stderr, 300))
	}
	return err
}

// serve follows a connected session until the server goes away or ctx
// ends, listing the tools again when the server says they changed. It
// returns why the session ended, with nothing left running. endCalls ends
// the calls under way, which closing the session would wait for.
func (s *server) serve(ctx context.Context, session *sdk.ClientSession, l *link, endCalls context.CancelFunc) error {
	var waitErr error
	ended := make(chan struct{})
	go func() {
		waitErr = session.Wait()
		close(ended)
	}()
	defer func() {
		endCalls()
		_ = session.Close()
		<-ended
	}()
	hung, stopPings := s.pings(ctx, session)
	defer stopPings()
	for {
		select {
		case <-ctx.Done():
			s.set(stateStopped, nil, nil, nil)
			endCalls()
			_ = session.Close()
			<-ended
			l.close()
			return ctx.Err()
		case <-ended:
			return s.down(session, l, endCalls, waitErr)
		case <-l.exit():
			// The connection may outlive the process when something it
			// started holds stdout open; the server is gone all the same.
			return s.down(session, l, endCalls, errors.New("the server process exited"))
		case err := <-hung:
			return s.down(session, l, endCalls, err)
		case <-s.relist:
			s.refreshTools(ctx, session)
		case <-s.loginLost():
			return s.down(session, l, endCalls, errLoginLost)
		}
	}
}

// down ends a session whose server went away. Calls fail fast from the
// start, while the rest is cleaned up.
func (s *server) down(session *sdk.ClientSession, l *link, endCalls context.CancelFunc, err error) error {
	s.set(stateRestarting, nil, nil, nil)
	endCalls()
	_ = session.Close()
	if err == nil {
		err = errors.New("the server closed the connection")
	}
	exit := l.close()
	if exit != "" {
		err = fmt.Errorf("%w (process: %s)", err, exit)
	}
	return s.withStderr(err, l.lastStderr())
}

// refreshTools lists the tools again; on failure the old list stays, and
// the next notification or reconnect tries again.
func (s *server) refreshTools(ctx context.Context, session *sdk.ClientSession) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	defer cancel()
	tools, err := s.listTools(ctx, session)
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.log.Warn("MCP server's tools changed but could not be listed", "err", err)
		}
		return
	}
	s.mu.Lock()
	current := s.session == session
	if current {
		s.tools = tools
	}
	s.mu.Unlock()
	if current {
		s.log.Info("MCP server's tools changed", "tools", len(tools))
		s.changed()
	}
}

// listTools lists every page of the server's tools and names them for the
// model. A tool whose name, made to fit, is another's is left out and
// logged: calls could not tell them apart.
func (s *server) listTools(ctx context.Context, session *sdk.ClientSession) ([]tool, error) {
	var tools []tool
	owner := map[string]string{}
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing tools: %w", err)
		}
		name := toolName(s.name, t.Name)
		if other, taken := owner[name]; taken {
			s.log.Warn("MCP tool left out: its name for the model is another tool's", "tool", t.Name, "other", other, "name", name)
			continue
		}
		owner[name] = t.Name
		spec, err := s.toolSpec(name, t)
		if err != nil {
			return nil, err
		}
		if n := len(spec.Parameters); n > s.limits.schema {
			s.log.Warn("MCP tool left out: its input schema is larger than mcp_max_schema_bytes", "tool", t.Name, "bytes", n, "mcp_max_schema_bytes", s.limits.schema)
			continue
		}
		tools = append(tools, tool{spec: spec, name: t.Name})
	}
	return tools, nil
}

// toolSpec describes a server's tool to the model under name: its input
// schema as the server wrote it (compact), or any object when it wrote
// none, and its description cut to mcp_max_description_chars.
func (s *server) toolSpec(name string, t *sdk.Tool) (agent.ToolSpec, error) {
	params := json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return agent.ToolSpec{}, fmt.Errorf("tool %q: its input schema: %w", t.Name, err)
		}
		params = b
	}
	description := t.Description
	if description == "" {
		description = t.Title
	}
	return agent.ToolSpec{Name: name, Description: cutDescription(description, s.limits.description),
		Parameters: params, Source: "MCP server " + s.name, Changes: changesThings(t.Annotations)}, nil
}

// descriptionCut marks a description cut short.
const descriptionCut = " […]"

// cutDescription bounds a description to limit characters, the mark
// included.
func cutDescription(d string, limit int) string {
	r := []rune(d)
	if len(r) <= limit {
		return d
	}
	return strings.TrimRightFunc(string(r[:limit-len([]rune(descriptionCut))]), unicode.IsSpace) + descriptionCut
}

func (s *server) set(st state, session *sdk.ClientSession, live context.Context, tools []tool) {
	s.mu.Lock()
	s.state, s.session, s.live, s.tools = st, session, live, tools
	s.mu.Unlock()
	s.changed()
}

// connection is a server's connected session as a call sees it.
type connection struct {
	session *sdk.ClientSession
	live    context.Context
	tools   []tool
}

// snapshot returns the connected session (nil when not connected) and
// the state. The caller owns the tools slice.
func (s *server) snapshot() (*connection, state) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateConnected {
		return nil, s.state
	}
	return &connection{session: s.session, live: s.live, tools: slices.Clone(s.tools)}, s.state
}

// stateNow is the server's state, for an error.
func (s *server) stateNow() state {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// clip shortens text quoted in an error or a log.
func clip(s string, limit int) string {
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > limit {
		return string(r[:limit-1]) + "…"
	}
	return s
}
