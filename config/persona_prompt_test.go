package config_test

import (
	"strings"
	"testing"

	"koe/config"
)

// persona_prompt_from names a configured MCP server and one of its
// prompts; anything else is refused at start with the key.
func TestPersonaPromptFrom(t *testing.T) {
	const servers = "mcp_servers:\n  personas: {command: /bin/true}\n"
	for _, c := range []struct{ conf, want string }{
		{servers + "character:\n  persona_prompt_from: {server: personas, prompt: storyteller, arguments: {tone: warm}}\n", ""},
		{servers + "character:\n  persona_prompt_from: {server: elsewhere, prompt: storyteller}\n",
			`persona_prompt_from.server: unknown MCP server "elsewhere" (mcp_servers has personas)`},
		{servers + "character:\n  persona_prompt_from: {server: personas}\n", "persona_prompt_from.prompt is empty"},
		{"character:\n  persona_prompt_from: {prompt: storyteller}\n", "persona_prompt_from.server is empty"},
	} {
		path := writeFile(t, t.TempDir(), "conf.yaml", c.conf)
		cfg, err := config.Load(path, true, env(nil))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.conf, err)
		case c.want == "" && (cfg.Character.PersonaPromptFrom == nil || cfg.Character.PersonaPromptFrom.Arguments["tone"] != "warm"):
			t.Errorf("%s: read as %+v", c.conf, cfg.Character.PersonaPromptFrom)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.conf, err, c.want)
		}
	}
}
