package config_test

import (
	"strings"
	"testing"

	"koe/config"
)

// A character attaches MCP resources to its knowledge from configured
// servers only, naming URIs or patterns that can work; the resource
// limits are read from the top level.
func TestMCPKnowledgeConfig(t *testing.T) {
	path := writeFile(t, t.TempDir(), "conf.yaml", `
mcp_servers:
  notes: {url: http://127.0.0.1:8931/mcp}
mcp_max_resources: 20
mcp_max_resource_bytes: 65536
mcp_max_resource_links: -1
mcp_max_subscriptions: 5
character:
  tts: {engine: none}
  tools:
    mcp_knowledge:
      - server: notes
        uris: ["notes://handbook"]
        match: ["notes://faq/*"]
`)
	cfg, err := config.Load(path, true, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Character.Tools.MCPKnowledge
	if len(k) != 1 || k[0].Server != "notes" || k[0].URIs[0] != "notes://handbook" || k[0].Match[0] != "notes://faq/*" {
		t.Errorf("tools.mcp_knowledge = %+v", k)
	}
	if l := cfg.MCP.ResourceLimits; l.MaxResources != 20 || l.MaxResourceBytes != 65536 || l.MaxResourceLinks != -1 || l.MaxSubscriptions != 5 {
		t.Errorf("resource limits = %+v", l)
	}

	for body, want := range map[string]string{
		`{server: other, uris: ["notes://a"]}`: `tools.mcp_knowledge[0]: unknown MCP server "other"`,
		`{server: notes}`:                      "tools.mcp_knowledge[0]: server notes: name uris or match patterns",
		`{server: notes, uris: ["handbook"]}`:  "is not a URI with a scheme",
	} {
		path := writeFile(t, t.TempDir(), "conf.yaml", `
mcp_servers:
  notes: {url: http://127.0.0.1:8931/mcp}
character:
  tts: {engine: none}
  tools:
    mcp_knowledge: [`+body+`]
`)
		if _, err := config.Load(path, true, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	path = writeFile(t, t.TempDir(), "conf.yaml", "mcp_max_resource_bytes: 100\n")
	if _, err := config.Load(path, true, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "mcp_max_resource_bytes 100 is out of range") {
		t.Errorf("a resource limit out of range: %v", err)
	}
}
