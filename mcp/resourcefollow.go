package mcp

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResourceSelection names some resources of one server: URIs read as
// they are (a template's, filled in), and patterns matched against the
// URIs the server lists ("*" within a path segment, as path.Match).
type ResourceSelection struct {
	Server string   `yaml:"server" json:"server"`
	URIs   []string `yaml:"uris" json:"uris"`
	Match  []string `yaml:"match" json:"match"`
}

// Check reports a selection that can never work.
func (sel ResourceSelection) Check() error {
	if len(sel.URIs) == 0 && len(sel.Match) == 0 {
		return fmt.Errorf("server %s: name uris or match patterns", sel.Server)
	}
	for _, u := range sel.URIs {
		if err := checkURI(u); err != nil {
			return fmt.Errorf("server %s: uris: %w", sel.Server, err)
		}
	}
	for _, p := range sel.Match {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return fmt.Errorf("server %s: match %q is not a pattern", sel.Server, p)
		}
	}
	return nil
}

// ReadResource is a followed resource, read: Data holds its text or its
// bytes (several parts joined), or Err says why it could not be read.
type ReadResource struct {
	Server, URI, Name, MIMEType string
	Data                        []byte
	Err                         error
}

// FollowResources delivers the selected resources of a server to got, read:
// each time the server connects (again), and again for each one the
// server says was updated (koe subscribes when the server takes
// subscriptions; a pattern is matched again when its list changes). It
// returns when ctx ends, unsubscribing what it subscribed; got is called
// from its goroutine, one at a time. The selection's server must be
// configured (CheckServers).
func (m *Manager) FollowResources(ctx context.Context, sel ResourceSelection, got func(context.Context, ReadResource)) error {
	if m == nil || m.servers[sel.Server] == nil {
		return fmt.Errorf("unknown MCP server %q", sel.Server)
	}
	s := m.servers[sel.Server]
	f := newFollower()
	defer s.subs.join(f)()
	followed := map[string]func() bool{}
	var names map[string]string
	defer func() {
		for uri, stop := range followed {
			if stop() {
				s.unsubscribe(uri)
			}
		}
	}()
	p := newPace(s.limits.res.MinRefresh)
	defer p.stop()
	var session *sdk.ClientSession
	for {
		changed := m.watch()
		c, _ := s.snapshot()
		var uris []string
		if c != nil && c.session != session {
			// Connected (again): whatever happened while it was down is
			// read anew.
			session = c.session
			f.take()
			p.reset()
			names = s.selected(ctx, sel)
			uris = s.follow(ctx, session, names, followed, f, true)
		} else if c != nil {
			updated, relist := f.take()
			// A list change is paced like a resource's update: a server
			// announcing one after another gets one listing per
			// mcp_resource_min_refresh.
			if relist && len(sel.Match) > 0 && len(p.ready([]string{relistKey}, time.Now())) == 0 {
				s.log.Debug("MCP resource list changed again within mcp_resource_min_refresh; listed later")
				relist = false
			}
			if relist && len(sel.Match) > 0 {
				p.read(relistKey, time.Now())
				before := names
				names = s.selected(ctx, sel)
				// The ones newly matched are read; the others when
				// updated.
				for _, uri := range s.follow(ctx, session, names, followed, f, false) {
					if _, ok := before[uri]; !ok && !slices.Contains(updated, uri) {
						updated = append(updated, uri)
					}
				}
			}
			var wanted []string
			for _, uri := range updated {
				if _, ok := names[uri]; ok {
					wanted = append(wanted, uri)
				}
			}
			uris = p.ready(wanted, time.Now())
			for _, uri := range wanted {
				if !slices.Contains(uris, uri) {
					s.log.Debug("MCP resource updated again within mcp_resource_min_refresh; read later", "uri", uri)
				}
			}
		}
		for _, uri := range uris {
			if ctx.Err() != nil {
				return nil
			}
			p.read(uri, time.Now())
			got(ctx, s.readWhole(ctx, uri, names[uri]))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake():
			// Held updates whose time came: as if updated now.
			for _, uri := range p.due(time.Now()) {
				f.mark(uri, uri == relistKey)
			}
		case <-changed:
		case <-f.wake:
		}
	}
}

// selected resolves a selection to URIs and their listed names: the URIs
// named, and the listed ones its patterns match, at most
// mcp_max_resources of the server's.
func (s *server) selected(ctx context.Context, sel ResourceSelection) map[string]string {
	out := map[string]string{}
	for _, u := range sel.URIs {
		out[u] = ""
	}
	if len(sel.Match) == 0 {
		return out
	}
	list, err := s.listResources(ctx)
	if err != nil {
		s.log.Warn("MCP resources to follow could not be listed", "err", err)
		return out
	}
	for _, r := range list.Resources {
		for _, p := range sel.Match {
			if ok, _ := path.Match(p, r.URI); ok {
				out[r.URI] = r.Name
			}
		}
		if _, named := out[r.URI]; named && out[r.URI] == "" {
			out[r.URI] = r.Name
		}
	}
	if list.More {
		s.log.Warn("MCP server lists more resources than mcp_max_resources; patterns match the first only", "mcp_max_resources", s.limits.res.MaxResources)
	}
	return out
}

// follow hears of the updates of each URI it did not follow yet,
// subscribing when the server takes subscriptions, and returns every URI,
// sorted, to read. On a new session (fresh) every URI is subscribed to
// again.
func (s *server) follow(ctx context.Context, session *sdk.ClientSession, names map[string]string, followed map[string]func() bool, f *follower, fresh bool) []string {
	uris := make([]string, 0, len(names))
	for uri := range names {
		uris = append(uris, uri)
	}
	slices.Sort(uris)
	kept := uris[:0]
	for _, uri := range uris {
		_, known := followed[uri]
		if !known {
			stop, err := s.subs.add(uri, f, s.limits.res.MaxSubscriptions)
			if err != nil {
				s.log.Error("MCP resource not followed", "uri", uri, "err", err)
				continue
			}
			followed[uri] = stop
		}
		kept = append(kept, uri)
		if known && !fresh || !offersSubscriptions(session) {
			continue
		}
		err := s.request(ctx, "subscribing to "+clip(uri, 200), func(ctx context.Context, cs *sdk.ClientSession) error {
			return cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri})
		})
		if err != nil {
			s.log.Warn("MCP resource subscription failed; it is read again at each reconnect only", "uri", uri, "err", err)
		}
	}
	return kept
}

// unsubscribe tells the server koe no longer follows uri, when it is
// connected and takes subscriptions; a failure only costs notices.
func (s *server) unsubscribe(uri string) {
	c, _ := s.snapshot()
	if c == nil || !offersSubscriptions(c.session) {
		return
	}
	ctx, cancel := context.WithTimeout(c.live, s.cfg.timeout())
	defer cancel()
	if err := c.session.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: uri}); err != nil {
		s.log.Debug("MCP resource unsubscribe failed", "uri", uri, "err", err)
	}
}

// readWhole reads a followed resource: its parts' text or bytes joined.
func (s *server) readWhole(ctx context.Context, uri, name string) ReadResource {
	r := ReadResource{Server: s.name, URI: uri, Name: name}
	contents, err := s.readResource(ctx, uri)
	if err != nil {
		r.Err = err
		return r
	}
	var parts [][]byte
	for _, c := range contents {
		if r.MIMEType == "" {
			r.MIMEType = c.MIMEType
		}
		if c.Blob != nil {
			parts = append(parts, c.Blob)
		} else {
			parts = append(parts, []byte(c.Text))
		}
	}
	r.Data = bytes.Join(parts, []byte("\n\n"))
	return r
}

// pace holds back the reading of a resource updated again within
// mcp_resource_min_refresh of its last reading: a server that says a
// resource changed all the time would otherwise have koe read and index
// it all the time. A held resource is read once its time comes.
type pace struct {
	every time.Duration
	last  map[string]time.Time
	held  map[string]bool
	timer *time.Timer
}

// relistKey stands for the server's resource list in a pace: no URI has
// an empty scheme.
const relistKey = ":list"

func newPace(every time.Duration) *pace {
	return &pace{every: every, last: map[string]time.Time{}, held: map[string]bool{}}
}

// reset forgets everything: a new session reads every resource at once.
func (p *pace) reset() {
	p.stop()
	p.last, p.held = map[string]time.Time{}, map[string]bool{}
}

// ready returns the URIs that may be read now and holds the others.
func (p *pace) ready(uris []string, now time.Time) []string {
	var out []string
	for _, uri := range uris {
		if last, ok := p.last[uri]; ok && now.Sub(last) < p.every {
			p.held[uri] = true
			continue
		}
		delete(p.held, uri)
		out = append(out, uri)
	}
	p.arm(now)
	return out
}

// read notes that uri is read at now.
func (p *pace) read(uri string, now time.Time) { p.last[uri] = now }

// due returns the held URIs whose time came, and no longer holds them.
func (p *pace) due(now time.Time) []string {
	p.timer = nil
	var out []string
	for uri := range p.held {
		if now.Sub(p.last[uri]) >= p.every {
			out = append(out, uri)
			delete(p.held, uri)
		}
	}
	slices.Sort(out)
	p.arm(now)
	return out
}

// arm sets the timer for the first held URI's time, if it is not set.
func (p *pace) arm(now time.Time) {
	if p.timer != nil || len(p.held) == 0 {
		return
	}
	first := time.Duration(-1)
	for uri := range p.held {
		if wait := p.every - now.Sub(p.last[uri]); first < 0 || wait < first {
			first = wait
		}
	}
	p.timer = time.NewTimer(max(first, 0))
}

// wake is the timer's channel (nil, which never fires, when none is set).
func (p *pace) wake() <-chan time.Time {
	if p.timer == nil {
		return nil
	}
	return p.timer.C
}

func (p *pace) stop() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}
