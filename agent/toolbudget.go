package agent

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// ToolsTooLargeError means the tool definitions are what does not fit the
// model's context window: without them, the request would. It says whose
// tools take how much, and what to change; errors.Is matches
// ErrContextTooLarge.
type ToolsTooLargeError struct {
	// Tokens is what the definitions take; Room what the window leaves
	// them beside the parts never cut (system prompt, message, reminder).
	Tokens, Room int
	Window       int
	// MaxTools is llm.max_tools, and Available how many tools there were
	// before it left some out.
	MaxTools, Available int
	// Groups are the definitions by who offers them, the largest first.
	Groups []ToolGroup
}

// ToolGroup is what the tools of one source take.
type ToolGroup struct {
	Source string // "MCP server search", or koe's own tools
	Tools  int
	Tokens int
}

// ownTools names the tools of no MCP server in messages.
const ownTools = "koe's own tools"

func (e *ToolsTooLargeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the tools do not fit the model's context window: their definitions take %d tokens, and the %d-token window (llm.context_window) leaves them %d beside the system prompt and the message", e.Tokens, e.Window, max(e.Room, 0))
	for i, g := range e.Groups {
		sep := "; "
		if i == 0 {
			sep = " — "
		}
		fmt.Fprintf(&b, "%s%s: %d tokens for %d %s", sep, g.Source, g.Tokens, g.Tools, plural(g.Tools, "tool", "tools"))
	}
	offered := 0
	for _, g := range e.Groups {
		offered += g.Tools
	}
	if e.Available > offered {
		fmt.Fprintf(&b, " (%d of %d tools offered, llm.max_tools %d)", offered, e.Available, e.MaxTools)
	}
	b.WriteString(". Offer fewer tools (fewer servers in tools.mcp_servers, a lower llm.max_tools), shorten their descriptions (mcp_max_description_chars), or raise llm.context_window")
	return b.String()
}

func (e *ToolsTooLargeError) Unwrap() error { return ErrContextTooLarge }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// groupTools adds up the tools by source, the largest first, in the order
// they come when they take as much.
func groupTools(tok *Tokenizer, specs []ToolSpec) []ToolGroup {
	var groups []ToolGroup
	index := map[string]int{}
	for _, s := range specs {
		source := s.Source
		if source == "" {
			source = ownTools
		}
		i, ok := index[source]
		if !ok {
			i = len(groups)
			index[source] = i
			groups = append(groups, ToolGroup{Source: source})
		}
		groups[i].Tools++
		groups[i].Tokens += tok.CountTool(s)
	}
	slices.SortStableFunc(groups, func(a, b ToolGroup) int { return cmp.Compare(b.Tokens, a.Tokens) })
	return groups
}
