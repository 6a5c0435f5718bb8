package server_test

import (
	"encoding/json"
	"testing"

	"koe/protocol"
)

// GET /api/characters/:conf_uid/mcp-prompts is behind the token like the
// rest of the API; a character without MCP servers has no prompts, and an
// unknown character is a 404.
func TestMCPPromptsRoute(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = testToken
	addr := startKoe(t, cfg).Addr()
	bearer := "Authorization: Bearer " + testToken
	const path = "/api/characters/koe_default/mcp-prompts"
	if r := rawGet(t, addr, path, addr); r.status != 401 {
		t.Errorf("without the token: %d", r.status)
	}
	r := rawGet(t, addr, path, addr, bearer)
	var list protocol.MCPPrompts
	if err := json.Unmarshal([]byte(r.body), &list); r.status != 200 || err != nil || list.Prompts == nil || len(list.Prompts) != 0 {
		t.Errorf("with the token: %d %s", r.status, r.body)
	}
	if r := rawGet(t, addr, "/api/characters/nobody/mcp-prompts", addr, bearer); r.status != 404 {
		t.Errorf("an unknown character: %d %s", r.status, r.body)
	}
}
