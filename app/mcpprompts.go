package app

import (
	"context"

	"koe/protocol"
)

// MCPPrompts lists the prompts of a character's MCP servers for the chat
// API (server.MCPPromptLister).
func (h hubChats) MCPPrompts(ctx context.Context, confUID string) (protocol.MCPPrompts, error) {
	return h.hub.MCPPrompts(ctx, confUID)
}
