package config

import (
	"fmt"

	"koe/conversation"
	"koe/mcp"
	"koe/tools"
)

// checkMCPKnowledge refuses resources attached to a character's knowledge
// from servers the file does not configure, or named so that no resource
// could match.
func (c Config) checkMCPKnowledge(ch conversation.Character) error {
	for i, k := range ch.Tools.MCPKnowledge {
		key := fmt.Sprintf("character %q: tools.mcp_knowledge[%d]", ch.ConfName, i)
		if err := c.MCP.CheckServers([]string{k.Server}); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if err := MCPSelection(k).Check(); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// MCPSelection is the MCP resources an entry of tools.mcp_knowledge names.
func MCPSelection(k tools.MCPKnowledge) mcp.ResourceSelection {
	return mcp.ResourceSelection{Server: k.Server, URIs: k.URIs, Match: k.Match}
}
