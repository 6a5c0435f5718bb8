package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResourceLimits bound what koe takes of the servers' resources: a server
// is outside koe's trust, and what it lists and sends is held in memory
// and read by the model.
type ResourceLimits struct {
	// MaxResources bounds how many resources, and how many templates, koe
	// lists of one server (0: DefaultMaxResources); the rest are not
	// shown, and a note says so.
	MaxResources int `yaml:"mcp_max_resources" json:"mcp_max_resources"`
	// MaxResourceBytes bounds one read of a resource, its text and its
	// blobs together (0: DefaultMaxResourceBytes); a larger one is
	// refused. What reaches the model is cut to mcp_max_result_chars.
	MaxResourceBytes int `yaml:"mcp_max_resource_bytes" json:"mcp_max_resource_bytes"`
	// MaxResourceLinks bounds how many resource links in one tool result
	// are read and put in the result (0: DefaultMaxResourceLinks; -1:
	// none, the links are shown as links).
	MaxResourceLinks int `yaml:"mcp_max_resource_links" json:"mcp_max_resource_links"`
	// MaxSubscriptions bounds how many resources koe follows on one
	// server (0: DefaultMaxSubscriptions); more are refused with an
	// error in the log.
	MaxSubscriptions int `yaml:"mcp_max_subscriptions" json:"mcp_max_subscriptions"`
	// MinRefresh is the least time between two readings of a followed
	// resource (0: DefaultMinRefresh): updates within it are read once
	// it has passed, together.
	MinRefresh time.Duration `yaml:"mcp_resource_min_refresh" json:"mcp_resource_min_refresh"`
}

// Defaults and bounds of the resource limits.
const (
	DefaultMaxResources     = 100
	maxMaxResources         = 10000
	DefaultMaxResourceBytes = 1 << 20
	minResourceBytes        = 1 << 10
	maxResourceBytes        = 64 << 20
	DefaultMaxResourceLinks = 3
	maxResourceLinks        = 50
	DefaultMaxSubscriptions = 64
	maxSubscriptions        = 10000
	DefaultMinRefresh       = 10 * time.Second
)

func (l ResourceLimits) validate() error {
	switch {
	case l.MaxResources < 0 || l.MaxResources > maxMaxResources:
		return fmt.Errorf("mcp_max_resources %d is out of range: 0 (%d) to %d", l.MaxResources, DefaultMaxResources, maxMaxResources)
	case l.MaxResourceBytes < 0 || l.MaxResourceBytes > 0 && (l.MaxResourceBytes < minResourceBytes || l.MaxResourceBytes > maxResourceBytes):
		return fmt.Errorf("mcp_max_resource_bytes %d is out of range: 0 (%d) or %d to %d", l.MaxResourceBytes, DefaultMaxResourceBytes, minResourceBytes, maxResourceBytes)
	case l.MaxResourceLinks < -1 || l.MaxResourceLinks > maxResourceLinks:
		return fmt.Errorf("mcp_max_resource_links %d is out of range: -1 (none), 0 (%d) or up to %d", l.MaxResourceLinks, DefaultMaxResourceLinks, maxResourceLinks)
	case l.MaxSubscriptions < 0 || l.MaxSubscriptions > maxSubscriptions:
		return fmt.Errorf("mcp_max_subscriptions %d is out of range: 0 (%d) to %d", l.MaxSubscriptions, DefaultMaxSubscriptions, maxSubscriptions)
	case l.MinRefresh < 0:
		return fmt.Errorf("mcp_resource_min_refresh %s is negative (default %s)", l.MinRefresh, DefaultMinRefresh)
	}
	return nil
}

// withDefaults fills in the zeros.
func (l ResourceLimits) withDefaults() ResourceLimits {
	or := cmp.Or[int]
	return ResourceLimits{
		MaxResources:     or(l.MaxResources, DefaultMaxResources),
		MaxResourceBytes: or(l.MaxResourceBytes, DefaultMaxResourceBytes),
		MaxResourceLinks: max(or(l.MaxResourceLinks, DefaultMaxResourceLinks), 0),
		MaxSubscriptions: or(l.MaxSubscriptions, DefaultMaxSubscriptions),
		MinRefresh:       cmp.Or(l.MinRefresh, DefaultMinRefresh),
	}
}

// resourceOptions adds what koe needs to follow resources: the updates of
// those it subscribed to, and changes of the list.
func (s *server) resourceOptions(opts *sdk.ClientOptions) {
	opts.ResourceUpdatedHandler = func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
		if req.Params != nil {
			s.subs.notify(req.Params.URI)
		}
	}
	opts.ResourceListChangedHandler = func(context.Context, *sdk.ResourceListChangedRequest) {
		s.subs.listChanged()
	}
}

// subscriptions are the resources followed on one server, and who follows
// each. The SDK calls notify on the connection's goroutine: it marks and
// wakes, and never blocks.
type subscriptions struct {
	mu        sync.Mutex
	followers map[string][]*follower
	all       []*follower
}

// follower is one FollowResources: the URIs updated since it last looked,
// and whether the list changed.
type follower struct {
	mu      sync.Mutex
	updated map[string]bool
	relist  bool
	wake    chan struct{}
}

func newFollower() *follower {
	return &follower{updated: map[string]bool{}, wake: make(chan struct{}, 1)}
}

func (f *follower) mark(uri string, relist bool) {
	f.mu.Lock()
	if relist {
		f.relist = true
	} else {
		f.updated[uri] = true
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// take returns and clears what happened since the last take.
func (f *follower) take() (updated []string, relist bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for uri := range f.updated {
		updated = append(updated, uri)
	}
	slices.Sort(updated)
	relist = f.relist
	f.updated, f.relist = map[string]bool{}, false
	return updated, relist
}

// join makes f hear of list changes until leave.
func (subs *subscriptions) join(f *follower) (leave func()) {
	subs.mu.Lock()
	subs.all = append(subs.all, f)
	subs.mu.Unlock()
	return func() {
		subs.mu.Lock()
		subs.all = slices.DeleteFunc(subs.all, func(g *follower) bool { return g == f })
		subs.mu.Unlock()
	}
}

// add makes f hear of uri's updates, within limit URIs on the server.
// stop ends it and reports whether f was uri's last follower.
func (subs *subscriptions) add(uri string, f *follower, limit int) (stop func() (last bool), err error) {
	subs.mu.Lock()
	defer subs.mu.Unlock()
	if subs.followers == nil {
		subs.followers = map[string][]*follower{}
	}
	if _, ok := subs.followers[uri]; !ok && len(subs.followers) >= limit {
		return nil, fmt.Errorf("already following %d resources, the most mcp_max_subscriptions allows", limit)
	}
	subs.followers[uri] = append(subs.followers[uri], f)
	return func() bool {
		subs.mu.Lock()
		defer subs.mu.Unlock()
		list := slices.DeleteFunc(subs.followers[uri], func(g *follower) bool { return g == f })
		if len(list) == 0 {
			delete(subs.followers, uri)
			return true
		}
		subs.followers[uri] = list
		return false
	}, nil
}

func (subs *subscriptions) notify(uri string) {
	subs.mu.Lock()
	defer subs.mu.Unlock()
	for _, f := range subs.followers[uri] {
		f.mark(uri, false)
	}
}

func (subs *subscriptions) listChanged() {
	subs.mu.Lock()
	defer subs.mu.Unlock()
	for _, f := range subs.all {
		f.mark("", true)
	}
}

// offersResources reports whether the server said it has resources.
func offersResources(session *sdk.ClientSession) bool {
	init := session.InitializeResult()
	return init != nil && init.Capabilities != nil && init.Capabilities.Resources != nil
}

// offersSubscriptions reports whether the server takes subscriptions.
func offersSubscriptions(session *sdk.ClientSession) bool {
	init := session.InitializeResult()
	return offersResources(session) && init.Capabilities.Resources.Subscribe
}

// request runs one request on the server's connected session, within its
// timeout, and words its failure for the model and the log.
func (s *server) request(ctx context.Context, what string, f func(context.Context, *sdk.ClientSession) error) error {
	if err := ctx.Err(); err != nil {
		return ctxError(err)
	}
	c, st := s.snapshot()
	if c == nil {
		return notConnected(s.name, st)
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	defer cancel()
	defer context.AfterFunc(c.live, cancel)()
	err := f(rctx, c.session)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctxError(ctx.Err())
	case c.live.Err() != nil, errors.Is(err, sdk.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return notConnected(s.name, stateRestarting)
	case rctx.Err() != nil:
		return fmt.Errorf("MCP server %s did not answer %s within %s (mcp_servers.%s.timeout)", s.name, what, s.cfg.timeout(), s.name)
	}
	var bounded *boundError
	if errors.As(err, &bounded) {
		return err
	}
	return fmt.Errorf("MCP server %s, %s: %s", s.name, what, clip(err.Error(), 300))
}

// boundError is a limit of koe's that a server's answer went over: its
// message is koe's own, not the server's.
type boundError struct{ msg string }

func (e *boundError) Error() string { return e.msg }

// Resource is one of a server's resources as listed.
type Resource struct {
	URI, Name, Title, Description, MIMEType string
	Size                                    int64
}

// ResourceTemplate is one of a server's URI templates (RFC 6570).
type ResourceTemplate struct {
	URITemplate, Name, Title, Description, MIMEType string
}

// ResourceList is what a server lists, within mcp_max_resources each;
// More says some were left out.
type ResourceList struct {
	Resources []Resource
	Templates []ResourceTemplate
	More      bool
}

// listResources lists the server's resources and templates, each up to
// mcp_max_resources: the listing stops there, rather than read more pages.
func (s *server) listResources(ctx context.Context) (ResourceList, error) {
	limit := s.limits.res.MaxResources
	var list ResourceList
	err := s.request(ctx, "listing resources", func(ctx context.Context, session *sdk.ClientSession) error {
		if !offersResources(session) {
			return &boundError{msg: fmt.Sprintf("MCP server %s offers no resources", s.name)}
		}
		for r, err := range session.Resources(ctx, nil) {
			if err != nil {
				return err
			}
			if len(list.Resources) == limit {
				list.More = true
				break
			}
			list.Resources = append(list.Resources, Resource{URI: r.URI, Name: r.Name, Title: r.Title,
				Description: r.Description, MIMEType: r.MIMEType, Size: r.Size})
		}
		for t, err := range session.ResourceTemplates(ctx, nil) {
			if err != nil {
				// A server may list resources and have no templates: the
				// method may be missing.
				s.log.Debug("MCP server's resource templates could not be listed", "err", err)
				break
			}
			if len(list.Templates) == limit {
				list.More = true
				break
			}
			list.Templates = append(list.Templates, ResourceTemplate{URITemplate: t.URITemplate, Name: t.Name,
				Title: t.Title, Description: t.Description, MIMEType: t.MIMEType})
		}
		return nil
	})
	return list, err
}

// ResourceContent is one part of a resource as read: Text, or Blob (Text
// then empty).
type ResourceContent struct {
	URI, MIMEType string
	Text          string
	Blob          []byte
}

// readResource reads uri, refusing contents over mcp_max_resource_bytes.
func (s *server) readResource(ctx context.Context, uri string) ([]ResourceContent, error) {
	var out []ResourceContent
	err := s.request(ctx, "reading "+clip(uri, 200), func(ctx context.Context, session *sdk.ClientSession) error {
		if !offersResources(session) {
			return &boundError{msg: fmt.Sprintf("MCP server %s offers no resources", s.name)}
		}
		res, err := session.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		if err != nil {
			return err
		}
		total := 0
		for _, c := range res.Contents {
			if c == nil {
				continue
			}
			total += len(c.Text) + len(c.Blob)
			if total > s.limits.res.MaxResourceBytes {
				return &boundError{msg: fmt.Sprintf("resource %s of MCP server %s is larger than mcp_max_resource_bytes (%s)", clip(uri, 200), s.name, size(s.limits.res.MaxResourceBytes))}
			}
			out = append(out, ResourceContent{URI: c.URI, MIMEType: c.MIMEType, Text: c.Text, Blob: c.Blob})
		}
		if len(out) == 0 {
			return &boundError{msg: fmt.Sprintf("resource %s of MCP server %s is empty", clip(uri, 200), s.name)}
		}
		return nil
	})
	return out, err
}

// Readable returns c's text: its text, or its blob when that is text by
// its MIME type and valid UTF-8. ok is false for anything else (an image,
// an archive), which the model cannot read.
func (c ResourceContent) Readable() (text string, ok bool) {
	if c.Blob == nil {
		return c.Text, true
	}
	if textual(c.MIMEType) && utf8.Valid(c.Blob) {
		return string(c.Blob), true
	}
	return "", false
}

// textual reports whether a MIME type is text people and models read.
func textual(mimeType string) bool {
	t, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		return false
	}
	if strings.HasPrefix(t, "text/") {
		return true
	}
	switch t {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml",
		"application/toml", "application/javascript", "application/x-sh", "application/sql":
		return true
	}
	return strings.HasSuffix(t, "+json") || strings.HasSuffix(t, "+xml")
}

// summary is the line the model gets for contents it cannot read.
func (c ResourceContent) summary() string {
	return "[" + orUnknown(c.MIMEType, "binary") + ", " + size(len(c.Blob)) + ": not text, not shown]"
}

// modelText is a read resource as the model gets it: each part headed by
// its URI, binary parts summarised.
func modelText(uri string, contents []ResourceContent) string {
	var b strings.Builder
	for i, c := range contents {
		if i > 0 {
			b.WriteString("\n\n")
		}
		u := c.URI
		if u == "" {
			u = uri
		}
		b.WriteString("[resource " + u)
		if c.MIMEType != "" {
			b.WriteString(", " + c.MIMEType)
		}
		b.WriteString("]\n")
		if text, ok := c.Readable(); ok {
			b.WriteString(text)
		} else {
			b.WriteString(c.summary())
		}
	}
	return b.String()
}
