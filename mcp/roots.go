//lint:file-ignore SA1019 roots are deprecated from protocol 2026-07-28 on, but the servers of today (server-filesystem among them) ask for them, and the SDK keeps them working through the deprecation window.

package mcp

import (
	"net/url"
	"path/filepath"
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Roots tell a server which folders it may work in. koe offers them to
// every server, with list-change notices, and lists each server's as
// SetRoots last set them (none until then): the folders of the characters
// that enable the server.

// addRoots offers the roots capability; the SDK answers roots/list from
// the client's roots and tells connected servers when they change.
func addRoots(caps *sdk.ClientCapabilities) {
	caps.RootsV2 = &sdk.RootCapabilities{ListChanged: true}
}

// SetRoots sets the folders each server is told of as its roots, by
// server name; servers not named have none. A server is told only when
// its list changed (notifications/roots/list_changed), and asks again.
// Folders are absolute paths; they are offered as file:// URIs.
func (m *Manager) SetRoots(folders map[string][]string) {
	if m == nil {
		return
	}
	for _, name := range m.cfg.names() {
		m.servers[name].setRoots(folders[name])
	}
}

// setRoots makes the client's roots folders, in their order.
func (s *server) setRoots(folders []string) {
	want := make([]*sdk.Root, 0, len(folders))
	var uris []string
	for _, f := range folders {
		r := folderRoot(f)
		if slices.Contains(uris, r.URI) {
			continue
		}
		uris = append(uris, r.URI)
		want = append(want, r)
	}
	s.rootsMu.Lock()
	old := s.roots
	s.roots = uris
	s.rootsMu.Unlock()
	if slices.Equal(old, uris) {
		return
	}
	var gone []string
	for _, u := range old {
		if !slices.Contains(uris, u) {
			gone = append(gone, u)
		}
	}
	// Each call notifies the connected session once; a server that asks
	// in between sees a list on its way to the new one, and asks again.
	s.client.RemoveRoots(gone...)
	s.client.AddRoots(want...)
	s.log.Info("MCP server's roots changed", "roots", len(uris))
}

// folderRoot is a folder as a root: its file:// URI, named by its last
// element.
func folderRoot(folder string) *sdk.Root {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(folder)}
	return &sdk.Root{URI: u.String(), Name: filepath.Base(folder)}
}

// FollowRoots sets the servers' roots to folders() now and again after
// each call of the returned kick, until the Manager closes: koe kicks it
// when a character file changes or on SIGHUP. folders runs on a goroutine
// of the Manager's, one call at a time; kicks while it runs make one more
// run, not one each.
func (m *Manager) FollowRoots(folders func() map[string][]string) (kick func()) {
	if m == nil {
		return func() {}
	}
	kicks := make(chan struct{}, 1)
	kicks <- struct{}{}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			select {
			case <-m.ctx.Done():
				return
			case <-kicks:
				m.SetRoots(folders())
			}
		}
	}()
	return func() {
		select {
		case kicks <- struct{}{}:
		default:
		}
	}
}
