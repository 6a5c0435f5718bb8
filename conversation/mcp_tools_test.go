package conversation_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"koe/agent"
	"koe/conversation"
	"koe/mcp"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/mock"
	"koe/tools"
)

// mcpTestServer builds the mcp package's test server once per test.
func mcpTestServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	build := exec.Command("go", "build", "-o", bin, "../mcp/testdata/server")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("building the MCP test server: %v", err)
	}
	return bin
}

// withMCP gives the rig real MCP servers and enables them, after the
// calculator, for its default character; it returns their tools once all
// are offered.
func withMCP(t *testing.T, servers map[string]mcp.ServerConfig, want int) (rigOption, func() []agent.ToolSpec) {
	t.Helper()
	m, err := mcp.Start(context.Background(), mcp.Config{Servers: servers}, koetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	var names []string
	for name := range servers {
		names = append(names, name)
	}
	slices.Sort(names)
	opt := func(d *conversation.Deps) {
		d.ToolServers = m
		ch := &d.Characters.(*mock.Characters).DefaultChar
		ch.Tools = tools.Config{Enabled: []string{"calculator"}, MCPServers: names}
	}
	ready := func() []agent.ToolSpec {
		t.Helper()
		tb := m.Toolbox(names)
		return testkit.Await(t, fmt.Sprintf("the MCP servers offer %d tools", want), func() ([]agent.ToolSpec, bool) {
			specs := tb.Specs()
			return specs, len(specs) == want
		})
	}
	return opt, ready
}

// turnErrors plays a typed turn and returns its error frames' texts.
func turnErrors(r *rig, text string) []string {
	r.t.Helper()
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: text})
	var errs []string
	for {
		f := r.next()
		switch {
		case f.Type == protocol.TypeError:
			errs = append(errs, f.Text)
		case f.Type == protocol.TypeBackendSynthComplete:
			played(r.sess)
		case f.Type == protocol.TypeControl && f.Text == protocol.ControlChainEnd:
			return errs
		}
	}
}

// A server offering 500 tools with the default 8,192-token window: the
// request carries the built-in tool first, then the server's in its
// order, up to llm.max_tools (128), and the turn is answered.
func TestManyServerToolsAreCapped(t *testing.T) {
	bin := mcpTestServer(t)
	opt, ready := withMCP(t, map[string]mcp.ServerConfig{"many": {Command: bin, Args: []string{"-tools", "500"}}}, 514)
	r := newRig(t, fakellm.Echo(0), opt)
	all := ready()
	tok := agent.NewTokenizer(fakellm.ModelID)
	t.Logf("the server's %d tools take %d tokens", len(all), tok.CountTools(all))

	if errs := turnErrors(r, "hello"); len(errs) > 0 {
		t.Fatalf("the turn failed: %q", errs)
	}
	reqs := r.llm.Requests()
	sent := reqs[len(reqs)-1].Tools
	if len(sent) != agent.DefaultMaxTools || sent[0] != "calculator" || sent[1] != "many__add_tool" {
		t.Fatalf("%d tools sent: %q…", len(sent), sent[:min(3, len(sent))])
	}
	var sentSpecs []agent.ToolSpec
	for _, s := range all {
		if slices.Contains(sent, s.Name) {
			sentSpecs = append(sentSpecs, s)
		}
	}
	// The server's tools go in the order it listed them.
	for i, s := range sentSpecs {
		if s.Name != sent[i+1] {
			t.Fatalf("tool %d sent is %s, the server's %d is %s", i+1, sent[i+1], i, s.Name)
		}
	}
	t.Logf("sent: %d tools, %d tokens", len(sent), tok.CountTools(sentSpecs)+tok.CountTools([]agent.ToolSpec{{Name: "calculator"}}))
}

// Tools whose definitions do not fit the window fail the turn with an
// error that names the server, what its tools take and what to change,
// not "send something shorter". Descriptions longer than
// mcp_max_description_chars reach the model cut.
func TestServerToolsTooLarge(t *testing.T) {
	bin := mcpTestServer(t)
	opt, ready := withMCP(t, map[string]mcp.ServerConfig{"big": {Command: bin, Args: []string{"-tools", "500", "-desc", "2000"}}}, 514)
	r := newRig(t, fakellm.Echo(0), opt)
	specs := ready()
	for _, s := range specs {
		if strings.HasPrefix(s.Name, "big__many_") && (len([]rune(s.Description)) > mcp.DefaultMaxDescriptionChars || !strings.HasSuffix(s.Description, "[…]")) {
			t.Fatalf("%s's description is %d characters: …%s", s.Name, len([]rune(s.Description)), s.Description[len(s.Description)-20:])
		}
	}
	errs := turnErrors(r, "hello")
	if len(errs) != 1 {
		t.Fatalf("error frames: %q", errs)
	}
	t.Logf("the error: %s", errs[0])
	want := regexp.MustCompile(`MCP server big: \d+ tokens for 127 tools`)
	for _, part := range []string{"llm.context_window", "llm.max_tools", "tools.mcp_servers", "mcp_max_description_chars"} {
		if !strings.Contains(errs[0], part) {
			t.Errorf("the error does not name %s", part)
		}
	}
	if !want.MatchString(errs[0]) || strings.Contains(errs[0], "send something shorter") {
		t.Errorf("the error does not say what the server's tools take")
	}
	if n := len(r.llm.Requests()); n != 0 {
		t.Errorf("%d requests reached the LLM", n)
	}
}
