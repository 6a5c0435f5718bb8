package mcp

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"koe/testkit"
)

// A server announcing list changes one after another is listed once per
// mcp_resource_min_refresh: the first change is listed (and what it adds
// read), the next within the interval is held.
func TestFollowResourcesRelistPaced(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, rec, _, d, stop := followNotes(t, time.Hour)
	if r := d.next(t); r.URI != "koe-test://notes/cat" {
		t.Fatalf("first delivery: %+v", r)
	}
	tb := m.Toolbox([]string{"res"})
	mustCall(t, tb, "res__add_note", `{"name":"dog"}`)
	if r := d.next(t); r.URI != "koe-test://notes/dog" {
		t.Fatalf("after the first change: %+v", r)
	}
	mustCall(t, tb, "res__add_note", `{"name":"owl"}`)
	const held = "MCP resource list changed again within mcp_resource_min_refresh; listed later"
	testkit.Eventually(t, "the second listing held", func() bool { return rec.count(slog.LevelDebug, held) == 1 })
	if len(d) != 0 {
		t.Fatalf("listed within the interval: %+v", <-d)
	}
	stop()
	m.Close()
}

// followNotes starts a manager on the resource test server with
// mcp_resource_min_refresh every, and follows its notes by pattern; stop
// ends the following and checks it ended cleanly.
func followNotes(t *testing.T, every time.Duration) (m *Manager, rec *recorder, g *gate, d deliveries, stop func()) {
	t.Helper()
	g = newGate()
	m, rec = startManager(t, Config{Servers: map[string]ServerConfig{"res": resourceServer()},
		ResourceLimits: ResourceLimits{MinRefresh: every}}, g.timing(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	d = make(deliveries, 8)
	done := make(chan error, 1)
	go func() {
		done <- m.FollowResources(ctx, ResourceSelection{Server: "res", Match: []string{"koe-test://notes/*"}}, d.got)
	}()
	return m, rec, g, d, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
