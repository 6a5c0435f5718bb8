package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"koe/protocol"
)

// MCPPrompts lists the prompts of a character's MCP servers, which a
// ChatRequest's MCPPrompt sends as the user's turn. Unavailable has a
// line for each server that could not say (not connected, say).
func (c *Client) MCPPrompts(ctx context.Context, confUID string) (*protocol.MCPPrompts, error) {
	if confUID == "" {
		return nil, errors.New("client: MCPPrompts needs a conf_uid (a message's additional_kwargs.conf_uid names the character it went to)")
	}
	var list protocol.MCPPrompts
	if err := c.do(ctx, http.MethodGet, "/api/characters/"+url.PathEscape(confUID)+"/mcp-prompts", nil, &list); err != nil {
		return nil, err
	}
	return &list, nil
}
