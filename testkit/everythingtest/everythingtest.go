// Package everythingtest finds the MCP project's reference server,
// server-everything from npm, for tests outside package mcp: it offers
// prompts with arguments, lists roots, and more. scripts/test.sh installs
// it under KOE_TEST_NPM_DIR (default: koe-test-npm in the user's cache
// directory).
package everythingtest

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"koe/client"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/proctest"
)

// Package is the server's npm package.
const Package = "@modelcontextprotocol/server-everything"

// Stdio is the command and arguments that run the server over stdio.
func Stdio(t testing.TB) (command string, args []string) {
	t.Helper()
	node, entry := Find(t)
	return node, []string{entry, "stdio"}
}

// Find returns node and the server's entry point (its first argument
// names the transport: stdio, streamableHttp); without them the test is
// skipped, or fails on CI. It leaves package mcp out of its imports, so
// that mcp's own tests use it too.
func Find(t testing.TB) (node, entry string) {
	t.Helper()
	return proctest.NPMEntry(t, Package, filepath.Join("dist", "index.js"))
}

// AwaitPrompt waits until the koe at baseURL lists the server's prompt
// named prompt for the character confUID: koe connects to its MCP servers
// in the background.
func AwaitPrompt(t testing.TB, baseURL, confUID, prompt string) {
	t.Helper()
	api, err := client.New(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the MCP prompt "+prompt+" listed", func() bool {
		list, err := api.MCPPrompts(context.Background(), confUID)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(list.Prompts, func(p protocol.MCPPrompt) bool { return p.Name == prompt })
	})
}
