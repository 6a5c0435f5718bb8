package protocol

// MCP prompts: templates an MCP server offers, which a user picks, fills
// in and sends as their turn. koe's page asks for them with
// fetch-mcp-prompts and sends one with use-mcp-prompt; the chat API lists
// them at GET /api/characters/:conf_uid/mcp-prompts and takes one as a
// chat request's mcp_prompt. Stock OLV clients never see these messages.
const (
	// TypeFetchMCPPrompts asks for the prompts of the servers the
	// session's character enables; the answer is an mcp-prompts message.
	TypeFetchMCPPrompts = "fetch-mcp-prompts"
	TypeMCPPrompts      = "mcp-prompts"
	// TypeUseMCPPrompt gets the prompt Inbound.MCPPrompt names, with its
	// arguments, and sends its text as the user's turn.
	TypeUseMCPPrompt = "use-mcp-prompt"
)

// MCPPromptRef names a server's prompt and the arguments to fill it with.
// A character's persona_prompt_from has the same shape.
type MCPPromptRef struct {
	Server    string            `json:"server" yaml:"server"`
	Prompt    string            `json:"prompt" yaml:"prompt"`
	Arguments map[string]string `json:"arguments,omitempty" yaml:"arguments"`
}

// MCPPrompt is one prompt a server offers.
type MCPPrompt struct {
	Server      string              `json:"server"`
	Name        string              `json:"name"`
	Title       string              `json:"title,omitempty"`
	Description string              `json:"description,omitempty"`
	Arguments   []MCPPromptArgument `json:"arguments"`
}

// MCPPromptArgument is one argument a prompt takes.
type MCPPromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// MCPPrompts is the answer to fetch-mcp-prompts and the body of GET
// /api/characters/:conf_uid/mcp-prompts: the prompts of the character's
// connected servers, and a line for each server that could not say
// (not connected, an error).
type MCPPrompts struct {
	Type        string      `json:"type,omitempty"`
	Prompts     []MCPPrompt `json:"prompts"`
	Unavailable []string    `json:"unavailable,omitempty"`
}
