package mcp

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"koe/agent"
)

// Manager keeps every configured MCP server connected, in the background,
// for the life of the process: one per koe.
type Manager struct {
	cfg     Config
	servers map[string]*server
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	watchMu sync.Mutex
	watchCh chan struct{}

	// logins are the OAuth consent URLs out with users (oauthrun.go).
	logins *pendingLogins
}

// Start validates cfg and starts connecting to every server; it does not
// wait for any. A server that fails to start, or later goes away, is tried
// again with a growing delay while its tools' calls fail with a clear
// error. The servers run until Close, or until ctx ends (then Close still
// waits for them to stop).
func Start(ctx context.Context, cfg Config, logger *slog.Logger, opts ...Option) (*Manager, error) {
	return start(ctx, cfg, logger, defaultTiming, opts...)
}

func start(ctx context.Context, cfg Config, logger *slog.Logger, t timing, opts ...Option) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(ctx)
	o := options{logins: &memoryLogins{}}
	for _, opt := range opts {
		opt(&o)
	}
	m := &Manager{cfg: cfg, servers: map[string]*server{}, cancel: cancel, watchCh: make(chan struct{}), logins: &pendingLogins{}, ctx: ctx}
	for _, name := range cfg.names() {
		// Validate has checked that it resolves.
		sc, _ := cfg.Servers[name].resolved(name)
		s := newServer(name, sc, cfg.limits(), logger, m.changed)
		m.attachAuth(s, o)
		m.servers[name] = s
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			s.run(ctx, t)
		}()
	}
	return m, nil
}

// Close stops every server and returns once they are stopped: stdio
// servers are asked to exit (stdin closed), then signalled, then killed
// with whatever they started, and waited for. Calls still running fail.
func (m *Manager) Close() {
	if m == nil {
		return
	}
	m.cancel()
	m.wg.Wait()
}

// CheckServers reports names that are not configured servers, for a
// character's list of enabled servers.
func (m *Manager) CheckServers(names []string) error {
	if m == nil {
		return Config{}.CheckServers(names)
	}
	return m.cfg.CheckServers(names)
}

// Toolbox returns the tools of the named servers, in that order, as they
// are at each call: a server's tools appear when it connects, change when
// it says they changed, and are gone while it is down. Names that are not
// configured servers are ignored: check them first with CheckServers.
func (m *Manager) Toolbox(servers []string) agent.Toolbox {
	tb := &toolbox{maxResultChars: DefaultMaxResultChars}
	if m == nil {
		return tb
	}
	tb.maxResultChars = m.cfg.maxResultChars()
	for _, name := range servers {
		if s, ok := m.servers[name]; ok && !slices.Contains(tb.servers, s) {
			tb.servers = append(tb.servers, s)
		}
	}
	return tb
}

// changed wakes whoever waits for a change of any server's state or tools.
func (m *Manager) changed() {
	m.watchMu.Lock()
	close(m.watchCh)
	m.watchCh = make(chan struct{})
	m.watchMu.Unlock()
}

// watch returns a channel closed at the next change: take it, look at the
// state, then wait on it, and no change is missed.
func (m *Manager) watch() <-chan struct{} {
	m.watchMu.Lock()
	defer m.watchMu.Unlock()
	return m.watchCh
}
