package proctest

import (
	"os"
	"path/filepath"
	"testing"
)

// NPMEntry returns node and the file rel of the npm package pkg, as
// scripts/test.sh installs it under KOE_TEST_NPM_DIR (default: koe-test-npm
// in the user's cache directory); without them the test is skipped or, on
// CI, fails.
func NPMEntry(tb testing.TB, pkg, rel string) (node, entry string) {
	tb.Helper()
	node = LookPath(tb, "node", "nodejs")
	dir := os.Getenv("KOE_TEST_NPM_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			Missing(tb, "no KOE_TEST_NPM_DIR and no cache directory", err)
		}
		dir = filepath.Join(cache, "koe-test-npm")
	}
	entry = filepath.Join(dir, "node_modules", pkg, rel)
	if _, err := os.Stat(entry); err != nil {
		Missing(tb, pkg+" is not installed (scripts/test.sh installs it with npm into KOE_TEST_NPM_DIR)", err)
	}
	return node, entry
}
