package cdp

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"koe/testkit"
)

// LaunchTest starts a browser for the test t and closes it when t ends,
// with its profile in t.TempDir(). Without a browser it skips t, unless
// the CI environment variable is set (as CI systems do), where a missing
// browser must not silently turn browser tests into passes: then it fails.
func LaunchTest(t testing.TB, opts Options) *Browser {
	t.Helper()
	testkit.External(t, "Chromium")
	if opts.Path == "" {
		path, err := FindBrowser()
		if errors.Is(err, ErrNoBrowser) {
			if ci := os.Getenv("CI"); ci != "" && !strings.EqualFold(ci, "false") {
				t.Fatalf("CI=%s and browser tests need Chromium: %v", ci, err)
			}
			t.Skipf("skipping browser test: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		opts.Path = path
	}
	if opts.UserDataDir == "" {
		opts.UserDataDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Launch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("browser output (tail):\n%s", b.Output())
		}
		_ = b.Close()
	})
	return b
}
