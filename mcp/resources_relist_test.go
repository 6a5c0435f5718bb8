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
	gate := newGate()
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"res": resourceServer()},
		ResourceLimits: ResourceLimits{MinRefresh: time.Hour}}, gate.timing(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	d := make(deliveries, 8)
	done := make(chan error, 1)
	go func() {
		done <- m.FollowResources(ctx, ResourceSelection{Server: "res", Match: []string{"koe-test://notes/*"}}, d.got)
	}()
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
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	m.Close()
}
