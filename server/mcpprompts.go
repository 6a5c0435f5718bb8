package server

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"koe/protocol"
)

// MCPPromptLister lists the MCP prompts a user of a character may send as
// a chat request's mcp_prompt. The Chats implementation offers it.
type MCPPromptLister interface {
	MCPPrompts(ctx context.Context, confUID string) (protocol.MCPPrompts, error)
}

// mcpPromptRoutes serves
//
//	GET /api/characters/:conf_uid/mcp-prompts   the prompts of the character's MCP servers
//
// behind the API's checks, like every /api route.
func (s *Server) mcpPromptRoutes(api fiber.Router) {
	api.Get("/characters/:conf_uid/mcp-prompts", func(c *fiber.Ctx) error {
		lister, ok := s.opts.Chats.(MCPPromptLister)
		if !ok {
			return c.JSON(protocol.MCPPrompts{Prompts: []protocol.MCPPrompt{}})
		}
		list, err := lister.MCPPrompts(c.UserContext(), c.Params("conf_uid"))
		if err != nil {
			return err
		}
		return c.JSON(list)
	})
}
