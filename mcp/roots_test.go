package mcp

import (
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"koe/testkit"
)

// server-everything lists the roots it was given (its get-roots-list tool
// is there only for a client that offers roots), and asks again when koe
// says they changed.
func TestEverythingRoots(t *testing.T) {
	cfg := everythingStdio(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	first, second := t.TempDir(), t.TempDir()+"/with space"
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"everything": cfg}}, defaultTiming)
	m.SetRoots(map[string][]string{"everything": {first}})
	tb := m.Toolbox([]string{"everything"})
	waitForTool(t, m, tb, "everything__get-roots-list")
	if out := mustCall(t, tb, "everything__get-roots-list", `{}`); !strings.Contains(out, "URI: file://"+first+"\n") || !strings.Contains(out, "(1 total)") {
		t.Fatalf("roots = %s", out)
	}
	// The change reaches the server as a notice, on which it asks again:
	// no event of koe's says when its answer arrived.
	m.SetRoots(map[string][]string{"everything": {second, first}})
	testkit.Eventually(t, "the server sees the new roots", func() bool {
		out := mustCall(t, tb, "everything__get-roots-list", `{}`)
		return strings.Contains(out, "(2 total)") && strings.Contains(out, "file://"+strings.ReplaceAll(second, " ", "%20"))
	})
	m.SetRoots(nil)
	testkit.Eventually(t, "the server sees no roots", func() bool {
		return strings.Contains(mustCall(t, tb, "everything__get-roots-list", `{}`), "no roots are currently configured")
	})
	m.Close()
}

func TestFolderRoot(t *testing.T) {
	r := folderRoot("/srv/koe/shared notes")
	if r.URI != "file:///srv/koe/shared%20notes" || r.Name != "shared notes" {
		t.Errorf("root = %+v", r)
	}
}

// FollowRoots sets the roots at once, and again when kicked.
func TestFollowRoots(t *testing.T) {
	cfg := everythingStdio(t)
	first, second := t.TempDir(), t.TempDir()
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"everything": cfg}}, defaultTiming)
	var mu sync.Mutex
	folder := first
	kick := m.FollowRoots(func() map[string][]string {
		mu.Lock()
		defer mu.Unlock()
		return map[string][]string{"everything": {folder}}
	})
	tb := m.Toolbox([]string{"everything"})
	waitForTool(t, m, tb, "everything__get-roots-list")
	testkit.Eventually(t, "the first folder offered", func() bool {
		return strings.Contains(mustCall(t, tb, "everything__get-roots-list", `{}`), "file://"+first+"\n")
	})
	mu.Lock()
	folder = second
	mu.Unlock()
	kick()
	testkit.Eventually(t, "the second folder offered", func() bool {
		out := mustCall(t, tb, "everything__get-roots-list", `{}`)
		return strings.Contains(out, "file://"+second+"\n") && !strings.Contains(out, first)
	})
}
