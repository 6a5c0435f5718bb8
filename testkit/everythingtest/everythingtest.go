// Package everythingtest finds the MCP project's reference server,
// server-everything from npm, for tests outside package mcp: it offers
// prompts with arguments, lists roots, and more. scripts/test.sh installs
// it under KOE_TEST_NPM_DIR (default: koe-test-npm in the user's cache
// directory).
package everythingtest

import (
	"os"
	"path/filepath"
	"testing"

	"koe/mcp"
	"koe/testkit/proctest"
)

// Package is the server's npm package.
const Package = "@modelcontextprotocol/server-everything"

// Stdio is the server over stdio; without node or the package the test
// is skipped, or fails on CI.
func Stdio(t testing.TB) mcp.ServerConfig {
	t.Helper()
	node := proctest.LookPath(t, "node", "nodejs")
	dir := os.Getenv("KOE_TEST_NPM_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			proctest.Missing(t, "no KOE_TEST_NPM_DIR and no cache directory", err)
		}
		dir = filepath.Join(cache, "koe-test-npm")
	}
	entry := filepath.Join(dir, "node_modules", Package, "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		proctest.Missing(t, Package+" is not installed (scripts/test.sh installs it with npm into KOE_TEST_NPM_DIR)", err)
	}
	return mcp.ServerConfig{Command: node, Args: []string{entry, "stdio"}}
}
