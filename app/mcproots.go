package app

import (
	"slices"

	"koe/config"
)

// followMCPRoots tells each MCP server the folders of the characters that
// enable it, as roots, now and whenever a character file is read anew or
// has gone (and on SIGHUP, see Reload). A server shared by characters gets
// every one's folders: it has one connection for all of them.
func (m *Main) followMCPRoots(characters *config.Characters) {
	if len(m.Config.MCP.Servers) == 0 {
		return
	}
	kick := m.mcp.FollowRoots(func() map[string][]string { return mcpRoots(characters, m) })
	characters.OnChange(kick)
	m.kickRoots = kick
}

// mcpRoots are the folders of every character that loads, by the MCP
// servers it enables.
func mcpRoots(characters *config.Characters, m *Main) map[string][]string {
	files, err := characters.List()
	if err != nil {
		m.Logger.Warn("MCP roots: cannot list the characters; the servers keep their roots", "err", err)
		return nil
	}
	roots := map[string][]string{}
	for _, f := range files {
		ch, err := characters.Load(f.Filename)
		if err != nil {
			continue // logged when it was read; it enables nothing
		}
		for _, folder := range ch.Tools.Folders() {
			for _, server := range ch.Tools.MCPServers {
				if !slices.Contains(roots[server], folder) {
					roots[server] = append(roots[server], folder)
				}
			}
		}
	}
	for _, folders := range roots {
		slices.Sort(folders)
	}
	return roots
}
