package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"koe/protocol"
)

// Bounds of prompts (mcp_max_prompts, mcp_max_prompt_chars).
const (
	DefaultMaxPrompts     = 100
	DefaultMaxPromptChars = 16000
	// minPromptChars leaves room for a prompt worth sending.
	minPromptChars = 200
)

// validatePrompts reports prompt settings that can never work.
func (c Config) validatePrompts() error {
	if c.MaxPrompts < 0 {
		return fmt.Errorf("mcp_max_prompts %d is negative (0: %d)", c.MaxPrompts, DefaultMaxPrompts)
	}
	if c.MaxPromptChars < 0 || c.MaxPromptChars > 0 && c.MaxPromptChars < minPromptChars {
		return fmt.Errorf("mcp_max_prompt_chars %d is out of range: 0 (%d) or at least %d", c.MaxPromptChars, DefaultMaxPromptChars, minPromptChars)
	}
	return nil
}

func (c Config) maxPrompts() int {
	if c.MaxPrompts == 0 {
		return DefaultMaxPrompts
	}
	return c.MaxPrompts
}

func (c Config) maxPromptChars() int {
	if c.MaxPromptChars == 0 {
		return DefaultMaxPromptChars
	}
	return c.MaxPromptChars
}

// Prompts lists the prompts of the named servers, in that order, asking
// each connected server now: a server that is down, or fails to answer,
// has a line in Unavailable instead. Each server's list stops at
// mcp_max_prompts; a prompt whose arguments' description is larger than
// mcp_max_schema_bytes is left out, as a tool's schema would be.
func (m *Manager) Prompts(ctx context.Context, servers []string) protocol.MCPPrompts {
	out := protocol.MCPPrompts{Prompts: []protocol.MCPPrompt{}}
	if m == nil {
		return out
	}
	for _, name := range servers {
		s, ok := m.servers[name]
		if !ok {
			continue
		}
		prompts, err := s.listPrompts(ctx, m.cfg.maxPrompts())
		if err != nil {
			out.Unavailable = append(out.Unavailable, err.Error())
			continue
		}
		out.Prompts = append(out.Prompts, prompts...)
	}
	return out
}

// listPrompts asks the server for its prompts, at most max of them.
func (s *server) listPrompts(ctx context.Context, max int) ([]protocol.MCPPrompt, error) {
	c, st := s.snapshot()
	if c == nil {
		return nil, notConnected(s.name, st)
	}
	if !offersPrompts(c.session) {
		return nil, nil
	}
	ctx, cancel := s.callContext(ctx, c)
	defer cancel()
	var out []protocol.MCPPrompt
	for p, err := range c.session.Prompts(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: listing prompts: %s", s.name, clip(err.Error(), 300))
		}
		if len(out) == max {
			s.log.Warn("MCP server offers more prompts than mcp_max_prompts; the rest are left out", "mcp_max_prompts", max)
			break
		}
		if b, _ := json.Marshal(p.Arguments); len(b) > s.limits.schema {
			s.log.Warn("MCP prompt left out: its arguments are larger than mcp_max_schema_bytes", "prompt", clip(p.Name, 80), "bytes", len(b), "mcp_max_schema_bytes", s.limits.schema)
			continue
		}
		out = append(out, s.promptOf(p))
	}
	return out, nil
}

// offersPrompts reports whether the server said it has prompts: asking
// one that did not is an error for nothing.
func offersPrompts(session *sdk.ClientSession) bool {
	init := session.InitializeResult()
	return init != nil && init.Capabilities != nil && init.Capabilities.Prompts != nil
}

// promptOf is a prompt as a client sees it, its descriptions cut to
// mcp_max_description_chars.
func (s *server) promptOf(p *sdk.Prompt) protocol.MCPPrompt {
	out := protocol.MCPPrompt{Server: s.name, Name: p.Name, Title: p.Title,
		Description: cutDescription(p.Description, s.limits.description), Arguments: []protocol.MCPPromptArgument{}}
	for _, a := range p.Arguments {
		if a == nil {
			continue
		}
		out.Arguments = append(out.Arguments, protocol.MCPPromptArgument{Name: a.Name, Title: a.Title,
			Description: cutDescription(a.Description, s.limits.description), Required: a.Required})
	}
	return out
}

// GetPrompt gets a server's prompt filled with ref's arguments and
// returns its messages' text, joined by blank lines: what is sent as the
// user's turn or becomes a persona. Content that is not text (an image, a
// binary resource) is a short line saying what it was. The arguments and
// the text are each bounded by mcp_max_prompt_chars: a longer prompt is
// refused rather than cut, as half a prompt says something else.
func (m *Manager) GetPrompt(ctx context.Context, ref protocol.MCPPromptRef) (string, error) {
	if m == nil {
		return "", fmt.Errorf("unknown MCP server %q: mcp_servers configures none", clip(ref.Server, 40))
	}
	s, ok := m.servers[ref.Server]
	if !ok {
		return "", m.cfg.CheckServers([]string{ref.Server})
	}
	if strings.TrimSpace(ref.Prompt) == "" {
		return "", errors.New("no prompt named: say which of the server's prompts to use")
	}
	limit := m.cfg.maxPromptChars()
	n := 0
	for k, v := range ref.Arguments {
		n += utf8.RuneCountInString(k) + utf8.RuneCountInString(v)
	}
	if n > limit {
		return "", fmt.Errorf("the prompt's arguments are %d characters long; mcp_max_prompt_chars is %d", n, limit)
	}
	c, st := s.snapshot()
	if c == nil {
		return "", notConnected(s.name, st)
	}
	callCtx, cancel := s.callContext(ctx, c)
	defer cancel()
	res, err := c.session.GetPrompt(callCtx, &sdk.GetPromptParams{Name: ref.Prompt, Arguments: ref.Arguments})
	switch {
	case ctx.Err() != nil:
		return "", ctxError(ctx.Err())
	case err != nil && c.live.Err() != nil:
		return "", notConnected(s.name, s.stateNow())
	case err != nil && callCtx.Err() != nil:
		return "", fmt.Errorf("MCP server %s did not answer within %s (mcp_servers.%s.timeout)", s.name, s.cfg.timeout(), s.name)
	case err != nil:
		return "", fmt.Errorf("MCP server %s: prompt %q: %s", s.name, clip(ref.Prompt, 80), clip(err.Error(), 300))
	}
	parts := make([]string, 0, len(res.Messages))
	for _, msg := range res.Messages {
		if msg == nil || msg.Content == nil {
			continue
		}
		if t := strings.TrimSpace(contentText(msg.Content)); t != "" {
			parts = append(parts, t)
		}
	}
	text := strings.Join(parts, "\n\n")
	if text == "" {
		return "", fmt.Errorf("MCP server %s: prompt %q has no text", s.name, clip(ref.Prompt, 80))
	}
	if n := utf8.RuneCountInString(text); n > limit {
		return "", fmt.Errorf("MCP server %s: prompt %q is %d characters long; mcp_max_prompt_chars is %d", s.name, clip(ref.Prompt, 80), n, limit)
	}
	return text, nil
}

// callContext bounds one request to the server: its timeout, and the
// session's life, which ends the request when the server goes away.
func (s *server) callContext(ctx context.Context, c *connection) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	stop := context.AfterFunc(c.live, cancel)
	return ctx, func() { stop(); cancel() }
}
