package protocol

// MCPServer is an MCP server's state as GET /api/mcp/servers and koe's
// page show it.
type MCPServer struct {
	Name string `json:"name"`
	// State is starting, connected, restarting, stopped or "needs
	// authorization".
	State string `json:"state"`
	Tools int    `json:"tools"`
	// AuthorizeURL, while the server needs authorization, is the consent
	// URL for the user to open; the browser comes back to koe's
	// /oauth/callback.
	AuthorizeURL string `json:"authorize_url,omitempty"`
	// Error says why no login could be offered.
	Error string `json:"error,omitempty"`
}

// TypeMCPServers is koe's event with every MCP server's state, sent to
// clients that asked for koe's events whenever one changes: koe's page
// shows the consent link of a server that needs authorization.
const TypeMCPServers = "mcp-servers"

// MCPServers is that event.
type MCPServers struct {
	Type    string      `json:"type"`
	Servers []MCPServer `json:"servers"`
}
