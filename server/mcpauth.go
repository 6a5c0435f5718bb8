package server

import (
	"github.com/gofiber/fiber/v2"

	"koe/protocol"
)

// MCPServers are the MCP servers' states and their OAuth logins:
//
//	GET /api/mcp/servers   each server's state, with the consent URL of one
//	                       that needs authorization
//	GET /oauth/callback    where an authorization server sends the user's
//	                       browser back with a code
type MCPServers interface {
	Status() []protocol.MCPServer
	// FinishLogin hands a callback's state, code, iss and error to the
	// login waiting for it, and returns that login's server; an error
	// is for the user (a state koe never handed out, or expired).
	FinishLogin(state, code, iss, refusal string) (string, error)
}

// callbackRoute is koe's OAuth redirect URI. It is the one route besides
// the probes that needs no server.auth_token: the browser comes back to it
// from the authorization server, and koe's cookie (SameSite=Strict) does
// not come along on that navigation. Its state parameter is the secret
// instead: a one-time value koe made for the login, which only someone who
// could read the consent URL (on koe's page or in its log) knows.
const callbackRoute = "/oauth/callback"

func (s *Server) mcpRoutes() {
	s.app.Get("/api/mcp/servers", func(c *fiber.Ctx) error {
		if s.opts.MCP == nil {
			return c.JSON([]protocol.MCPServer{})
		}
		return c.JSON(s.opts.MCP.Status())
	})
	s.app.Get(callbackRoute, func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "no-store")
		if s.opts.MCP == nil {
			return fiber.NewError(fiber.StatusNotFound, "koe has no MCP servers waiting for a login")
		}
		refusal := c.Query("error")
		if d := c.Query("error_description"); refusal != "" && d != "" {
			refusal += ": " + d
		}
		server, err := s.opts.MCP.FinishLogin(c.Query("state"), c.Query("code"), c.Query("iss"), refusal)
		if err != nil {
			return fiber.NewError(fiber.StatusBadRequest, err.Error())
		}
		s.log.Info("MCP login came back from the authorization server", "mcp_server", server, "declined", refusal != "")
		c.Type("txt", "utf-8")
		if refusal != "" {
			return c.SendString("The login to MCP server " + server + " was declined. koe's page shows a new link to try again.\n")
		}
		return c.SendString("Logged in to MCP server " + server + ": koe connects to it now. You can close this tab.\n")
	})
}
