package mcp

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// checkEverythingResources lists, reads and follows the reference server's
// resources, and reads the links its get-resource-links tool returns.
func checkEverythingResources(t *testing.T, cfg ServerConfig) {
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"everything": cfg},
		ResourceLimits: ResourceLimits{MinRefresh: time.Nanosecond}}, defaultTiming)
	tb := m.Toolbox([]string{"everything"})
	waitForTool(t, m, tb, ReadResourceTool)

	list := mustCall(t, tb, ReadResourceTool, `{"server":"everything"}`)
	t.Logf("the list:\n%s", list)
	for _, want := range []string{"demo://resource/static/document/architecture.md (architecture.md, text/markdown)", "demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"} {
		if !strings.Contains(list, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	if out := mustCall(t, tb, ReadResourceTool, `{"server":"everything","uri":"demo://resource/static/document/architecture.md"}`); !strings.Contains(out, "[resource demo://resource/static/document/architecture.md, text/markdown]\n#") {
		t.Errorf("architecture.md = %q", clip(out, 300))
	}
	// A template filled in; its blob is text/plain, so it is read as text.
	if out := mustCall(t, tb, ReadResourceTool, `{"server":"everything","uri":"demo://resource/dynamic/blob/7"}`); !strings.Contains(out, "Resource 7: This is a base64 blob") {
		t.Errorf("blob 7 = %q", out)
	}
	if _, err := call(t, tb, ReadResourceTool, `{"server":"everything","uri":"demo://resource/dynamic/text/zero"}`); err == nil || !strings.Contains(err.Error(), "MCP server everything, reading demo://resource/dynamic/text/zero") {
		t.Errorf("a template's wrong variable: %v", err)
	}

	out := mustCall(t, tb, "everything__get-resource-links", `{"count":3}`)
	for _, want := range []string{"Resource 1: This is a base64 blob", "Resource 2: This is a plaintext resource", "Resource 3: This is a base64 blob"} {
		if !strings.Contains(out, want) {
			t.Errorf("the links' result lacks %q:\n%s", want, out)
		}
	}

	// Followed: delivered once, and again when the server says it was
	// updated (it starts sending updates when asked to).
	ctx, cancel := context.WithCancel(context.Background())
	d := make(deliveries, 8)
	done := make(chan error, 1)
	go func() {
		done <- m.FollowResources(ctx, ResourceSelection{Server: "everything", URIs: []string{"demo://resource/static/document/features.md"}}, d.got)
	}()
	if r := d.next(t); r.Err != nil || r.MIMEType != "text/markdown" || !strings.HasPrefix(string(r.Data), "#") {
		t.Fatalf("first delivery: %+v", r)
	}
	mustCall(t, tb, "everything__toggle-subscriber-updates", `{}`)
	if r := d.next(t); r.Err != nil || r.URI != "demo://resource/static/document/features.md" {
		t.Fatalf("after the update: %+v", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	m.Close()
}

func TestEverythingResourcesStdio(t *testing.T) {
	cfg := everythingStdio(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	checkEverythingResources(t, cfg)
}

func TestEverythingResourcesHTTP(t *testing.T) {
	cfg := everythingHTTP(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	checkEverythingResources(t, cfg)
}

// One read_resource call, measured as benchmarkEcho measures a call.
const everythingDoc = `{"server":"s","uri":"demo://resource/static/document/architecture.md"}`

func BenchmarkEverythingReadResourceStdio(b *testing.B) {
	benchmarkEcho(b, everythingStdio(b), ReadResourceTool, everythingDoc)
}

func BenchmarkEverythingReadResourceHTTP(b *testing.B) {
	benchmarkEcho(b, everythingHTTP(b), ReadResourceTool, everythingDoc)
}

func BenchmarkGoServerReadResourceStdio(b *testing.B) {
	benchmarkEcho(b, resourceServer(), ReadResourceTool, `{"server":"s","uri":"koe-test://notes/cat"}`)
}

// A tool result with four resource links, three read in place (the
// default): what resolving them costs over the call itself.
func BenchmarkGoServerResourceLinksStdio(b *testing.B) {
	benchmarkEcho(b, resourceServer(), "s__links", `{}`)
}
