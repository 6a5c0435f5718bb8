package app

import (
	"net"
	"strconv"
	"sync/atomic"

	"koe/config"
	"koe/mcp"
	"koe/protocol"
)

// mcpOptions are how koe's MCP servers log in: their OAuth logins kept in
// koe's store, and the browser sent back to koe's own /oauth/callback
// unless mcp_oauth_redirect_url says where koe is reached.
func (m *Main) mcpOptions(store appStore) []mcp.Option {
	return []mcp.Option{mcp.WithLoginStore(store), mcp.WithCallbackURL(m.mcpCallback.Load)}
}

// callbackURL is http(s)://host:port/oauth/callback for the address koe
// listens on: a wildcard listen address is reached as localhost, the
// browser being on this machine in the usual set-up (a remote one needs
// mcp_oauth_redirect_url).
func callbackURL(cfg config.Config, ln net.Listener, tls bool) string {
	host := cfg.Server.Host
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	port := strconv.Itoa(cfg.Server.Port)
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
	}
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, port) + mcp.CallbackPath
}

// callbackHolder is the callback URL, known once koe listens.
type callbackHolder struct{ v atomic.Pointer[string] }

func (h *callbackHolder) Load() string {
	if p := h.v.Load(); p != nil {
		return *p
	}
	return ""
}

func (h *callbackHolder) Store(s string) { h.v.Store(&s) }

// reportMCP sends the MCP servers' states to every session that asked for
// koe's events, at each change: koe's page shows a consent link.
func (m *Main) reportMCP() {
	hub := m.hub
	m.mcp.ReportStatus(func(st []protocol.MCPServer) {
		hub.NotifyAll(protocol.MCPServers{Type: protocol.TypeMCPServers, Servers: st})
	})
}
