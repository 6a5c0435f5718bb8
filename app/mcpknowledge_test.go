package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"koe/app"
	"koe/client"
	"koe/mcp"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/logwatch"
	"koe/tools"
)

// startNotesServer builds koe's MCP test server and runs it over
// streamable HTTP with its resources until the test ends; it returns the
// endpoint's URL.
func startNotesServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command("go", "build", "-o", bin, "koe/mcp/testdata/server").CombinedOutput(); err != nil {
		t.Fatalf("building the MCP test server: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-http", "-resources")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Its first line is its URL; only a hang makes the guard fire.
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the MCP test server said no URL: %v", err)
	}
	return strings.TrimSpace(line)
}

// A character attaches an MCP server's resource to its knowledge: it is
// read in when the server connects, the model reads it as a document it
// can cite, and when the server says it changed, the new version replaces
// the old one.
func TestMCPResourcesInKnowledge(t *testing.T) {
	url := startNotesServer(t)
	var mu sync.Mutex
	var prompts []string
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		var all strings.Builder
		for _, m := range r.Messages {
			all.WriteString(m.Content + "\n")
		}
		mu.Lock()
		prompts = append(prompts, all.String())
		mu.Unlock()
		return fakellm.Reply{Tokens: fakellm.Words("It is in the notes [1].")}
	})
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), llm.URL()), llm)
	cfg.MCP.Servers = map[string]mcp.ServerConfig{"notes": {URL: url}}
	// The update below comes right after the first reading.
	cfg.MCP.MinRefresh = time.Nanosecond
	cfg.Character.Tools.MCPKnowledge = []tools.MCPKnowledge{{Server: "notes", URIs: []string{"koe-test://notes/cat"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := logwatch.New(t, "koe")
	m := &app.Main{Config: cfg, Logger: logs.Logger(), Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	const read = "MCP resource read into the knowledge base"
	logs.WaitFor(read, 1)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard only
	defer cancel()
	api, err := client.New("http://" + m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ask := func() string {
		t.Helper()
		if _, err := api.Invoke(ctx, protocol.ChatRequest{Message: "What is the cat called?"}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return prompts[len(prompts)-1]
	}
	if p := ask(); !strings.Contains(p, "Biscuit") || !strings.Contains(p, "notes-cat.md") {
		t.Fatalf("the model was not given the resource as a document:\n%s", p)
	}

	// The server changes the note and says so: koe reads it again.
	session, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	if _, err := session.CallTool(ctx, &sdk.CallToolParams{Name: "set_note", Arguments: map[string]any{"text": "The cat is called Whiskers now."}}); err != nil {
		t.Fatal(err)
	}
	logs.WaitFor(read, 2)
	if p := ask(); !strings.Contains(p, "Whiskers") || strings.Contains(p, "Biscuit") {
		t.Fatalf("the model was not given the new version alone:\n%s", p)
	}

	// One document, replaced, as the documents API lists it.
	resp, err := http.Get("http://" + m.Addr() + "/api/characters/" + cfg.Character.ConfUID + "/documents")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Documents []struct{ Name, Title string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Documents) != 1 || out.Documents[0].Name != "notes-cat.md" || out.Documents[0].Title != "The cat" {
		t.Errorf("documents: %+v", out.Documents)
	}
}
