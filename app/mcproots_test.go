package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koe/client"
	"koe/mcp"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/everythingtest"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// rootsLLM has the model call server-everything's get-roots-list, then
// answer with what it returned.
func rootsLLM(r fakellm.Request) fakellm.Reply {
	if !r.Stream {
		return fakellm.Reply{Tokens: []string{"They talked."}}
	}
	if last := r.Messages[len(r.Messages)-1]; last.Role == "tool" {
		return fakellm.Reply{Tokens: []string{last.Content}}
	}
	return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: "everything__get-roots-list", Arguments: `{}`}}}
}

// The MCP server is told, as roots, the read_file folders of the
// characters that enable it, and told again when a character file
// changes.
func TestMCPRootsFollowCharacters(t *testing.T) {
	command, args := everythingtest.Stdio(t)
	llm := koetest.StartLLM(t, rootsLLM)
	cfg := koetest.Config(t, t.TempDir(), llm.URL())
	own, other, moved := t.TempDir(), t.TempDir(), t.TempDir()+"/moved"
	for _, d := range []string{cfg.CharactersDir, moved} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg.MCP.Servers = map[string]mcp.ServerConfig{"everything": {Command: command, Args: args}}
	cfg.Character.Tools.Enabled = []string{"read_file"}
	cfg.Character.Tools.Files.Root = own
	cfg.Character.Tools.MCPServers = []string{"everything"}
	file := filepath.Join(cfg.CharactersDir, "second.yaml")
	writeCharacter := func(root string) {
		t.Helper()
		if err := os.WriteFile(file, []byte("conf_name: Second\nconf_uid: second\ntools:\n  files:\n    root: "+root+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeCharacter(other)
	m := koetest.StartKoe(t, cfg)
	base := "http://" + m.Addr()
	everythingtest.AwaitPrompt(t, base, cfg.Character.ConfUID, "args-prompt")
	api, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	roots := func(conf string) string {
		t.Helper()
		ans, err := api.Invoke(context.Background(), protocol.ChatRequest{Message: "Which roots?", ConfUID: conf})
		if err != nil {
			t.Fatal(err)
		}
		return ans.Content
	}
	if got := roots(cfg.Character.ConfUID); !strings.Contains(got, "(2 total)") || !strings.Contains(got, "URI: file://"+own+"\n") || !strings.Contains(got, "URI: file://"+other+"\n") {
		t.Fatalf("roots at start: %s", got)
	}

	writeCharacter(moved)
	// The next request for the character reads the file anew; the server
	// is told, and asks again in its own time.
	testkit.Eventually(t, "the moved folder offered", func() bool {
		got := roots("second")
		return strings.Contains(got, "URI: file://"+moved+"\n") && !strings.Contains(got, other)
	})
}
