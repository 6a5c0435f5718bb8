package conversation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"koe"
	"koe/internal/quote"
	"koe/protocol"
)

// PromptServers are the MCP servers' prompts (package mcp's Manager, when
// Deps.ToolServers is one).
type PromptServers interface {
	// Prompts lists the prompts of the named servers.
	Prompts(ctx context.Context, servers []string) protocol.MCPPrompts
	// GetPrompt gets a prompt filled with its arguments, as text.
	GetPrompt(ctx context.Context, ref protocol.MCPPromptRef) (string, error)
}

// promptServers returns the prompts' source, nil when no server is
// configured.
func (d *Deps) promptServers() PromptServers {
	p, _ := d.ToolServers.(PromptServers)
	return p
}

// validatePersonaPrompt checks persona_prompt_from's shape; config checks
// that its server is configured.
func (c Character) validatePersonaPrompt() error {
	ref := c.PersonaPromptFrom
	if ref == nil {
		return nil
	}
	switch {
	case ref.Server == "":
		return errors.New("persona_prompt_from.server is empty: name the MCP server (mcp_servers) whose prompt is the persona")
	case strings.TrimSpace(ref.Prompt) == "":
		return errors.New("persona_prompt_from.prompt is empty: name the server's prompt")
	}
	return nil
}

// persona is the character's persona for a new cast: the MCP prompt
// persona_prompt_from names, got now, or persona_prompt when there is
// none, or when the server is not connected or fails (logged); the next
// cast (a new session, a switch of character) tries again.
func (d *Deps) persona(ctx context.Context, char Character, log *slog.Logger) string {
	ref := char.PersonaPromptFrom
	if ref == nil {
		return char.Persona
	}
	ps := d.promptServers()
	if ps == nil {
		log.Warn("persona_prompt_from: no MCP servers are configured; using persona_prompt", "conf_uid", char.ConfUID)
		return char.Persona
	}
	text, err := ps.GetPrompt(ctx, *ref)
	if err != nil {
		log.Warn("persona_prompt_from: the MCP prompt is unavailable; using persona_prompt until a later session gets it",
			"conf_uid", char.ConfUID, "server", ref.Server, "prompt", ref.Prompt, "err", err)
		return char.Persona
	}
	return text
}

// mcpPrompts lists the prompts of the servers the character enables.
func (d *Deps) mcpPrompts(ctx context.Context, char Character) protocol.MCPPrompts {
	ps := d.promptServers()
	if ps == nil || len(char.Tools.MCPServers) == 0 {
		return protocol.MCPPrompts{Prompts: []protocol.MCPPrompt{}}
	}
	return ps.Prompts(ctx, char.Tools.MCPServers)
}

// mcpPromptText gets the prompt ref names for a user's turn, from a
// server the character enables: the only servers a user of the character
// reaches.
func (d *Deps) mcpPromptText(ctx context.Context, char Character, ref protocol.MCPPromptRef) (string, error) {
	if !slices.Contains(char.Tools.MCPServers, ref.Server) {
		return "", invalid("MCP server %q is not one the character %s enables (tools.mcp_servers)", quote.Shorten(ref.Server, 40), char.ConfName)
	}
	ps := d.promptServers()
	if ps == nil {
		return "", invalid("no MCP servers are configured")
	}
	text, err := ps.GetPrompt(ctx, ref)
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", &koe.Error{Kind: koe.Invalid, Err: fmt.Errorf("the MCP prompt: %w", err)}
	}
	return text, nil
}

// MCPPrompts lists the prompts a user of the character with confUID may
// send (GET /api/characters/:conf_uid/mcp-prompts).
func (h *Hub) MCPPrompts(ctx context.Context, confUID string) (protocol.MCPPrompts, error) {
	char, ok := h.deps.Characters.Find(confUID)
	if !ok {
		return protocol.MCPPrompts{}, koe.Errorf(koe.NotFound, "no character has conf_uid %q", quote.Shorten(confUID, 80))
	}
	return h.deps.mcpPrompts(ctx, char), nil
}

// fetchMCPPrompts answers fetch-mcp-prompts.
func (s *Session) fetchMCPPrompts() {
	list := s.deps.mcpPrompts(s.ctx, s.Character())
	list.Type = protocol.TypeMCPPrompts
	s.reply(list)
}

// useMCPPrompt answers use-mcp-prompt: the prompt's text is the user's
// turn, as if typed, so that every client of the history sees it alike.
func (s *Session) useMCPPrompt(ref *protocol.MCPPromptRef) error {
	if ref == nil {
		return invalid(`"mcp_prompt" is missing: {"server", "prompt", "arguments"}`)
	}
	text, err := s.deps.mcpPromptText(s.ctx, s.Character(), *ref)
	if err != nil {
		return err
	}
	return s.startText(text, nil)
}
