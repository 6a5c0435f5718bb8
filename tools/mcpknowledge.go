package tools

// MCPKnowledge attaches resources of an MCP server to the character's
// knowledge base (tools.mcp_knowledge): they are read as documents are,
// kept whole or searched, cited by name, and read again when the server
// says they changed. The server must be configured (top-level
// mcp_servers); it need not be in tools.mcp_servers.
type MCPKnowledge struct {
	// Server names the MCP server.
	Server string `yaml:"server"`
	// URIs are resources read as they are (a template's URI with its
	// variables filled in).
	URIs []string `yaml:"uris"`
	// Match are patterns matched against the URIs the server lists ("*"
	// within a path segment), at most mcp_max_resources of them.
	Match []string `yaml:"match"`
}
