package mcp

import sdk "github.com/modelcontextprotocol/go-sdk/mcp"

// changesThings reads a tool's annotations: a tool that says it is
// destructive, or says it is not read-only, changes things, and runs
// only after the user's yes (agent.Guard). A tool without annotations
// says nothing, and runs unasked unless the character's tools.confirm
// names it.
func changesThings(a *sdk.ToolAnnotations) bool {
	if a == nil {
		return false
	}
	if a.DestructiveHint != nil && *a.DestructiveHint {
		return true
	}
	return !a.ReadOnlyHint
}
