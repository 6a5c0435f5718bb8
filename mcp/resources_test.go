package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"koe/testkit"
)

// resourceServer is the test server with its resources.
func resourceServer() ServerConfig { return stdio("-resources") }

// The model lists and reads a server's resources through read_resource:
// text as it is, a template filled in, binary summarised, too large
// refused; arguments are checked before the server is asked; a server
// without resources is not offered.
func TestReadResourceTool(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{
		"res": resourceServer(), "plain": stdio(),
	}, ResourceLimits: ResourceLimits{MaxResourceBytes: 64 << 10}}, defaultTiming)

	plain := m.Toolbox([]string{"plain"})
	waitForTool(t, m, plain, "plain__echo")
	if hasTool(plain, ReadResourceTool) {
		t.Error("read_resource offered for a server without resources")
	}

	tb := m.Toolbox([]string{"plain", "res"})
	waitForTool(t, m, tb, ReadResourceTool)
	waitForTool(t, m, tb, "plain__echo")
	for _, s := range tb.Specs() {
		if s.Name != ReadResourceTool {
			continue
		}
		var schema struct {
			Properties struct {
				Server struct {
					Enum []string `json:"enum"`
				} `json:"server"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(s.Parameters, &schema); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(schema.Properties.Server.Enum, ","); got != "res" {
			t.Errorf("read_resource's servers = %q, want res only", got)
		}
	}

	list := mustCall(t, tb, ReadResourceTool, `{"server":"res"}`)
	for _, want := range []string{"koe-test://notes/cat (cat.md, text/markdown): A note about the cat.", "koe-test://files/logo.png", "koe-test://files/huge.txt", "koe-test://rooms/{room}"} {
		if !strings.Contains(list, want) {
			t.Errorf("the list lacks %q:\n%s", want, list)
		}
	}
	if out := mustCall(t, tb, ReadResourceTool, `{"server":"res","uri":"koe-test://notes/cat"}`); !strings.Contains(out, "[resource koe-test://notes/cat, text/markdown]\n# The cat") || !strings.Contains(out, "Biscuit") {
		t.Errorf("the note read = %q", out)
	}
	// The template's resource comes as a text/plain blob: it is text.
	if out := mustCall(t, tb, ReadResourceTool, `{"server":"res","uri":"koe-test://rooms/attic"}`); !strings.Contains(out, "The attic has a round window.") {
		t.Errorf("the room read = %q", out)
	}
	if out := mustCall(t, tb, ReadResourceTool, `{"server":"res","uri":"koe-test://files/logo.png"}`); !strings.Contains(out, "[image/png, 2 KB: not text, not shown]") {
		t.Errorf("the logo read = %q, want it summarised", out)
	}
	for args, want := range map[string]string{
		`{"server":"res","uri":"koe-test://files/huge.txt"}`: "larger than mcp_max_resource_bytes (64 KB)",
		`{"server":"plain","uri":"koe-test://notes/cat"}`:    "MCP server plain offers no resources",
		`{"server":"other","uri":"koe-test://notes/cat"}`:    `"other" is not a server with resources (available: res)`,
		`{"server":"res","uri":"notes/cat"}`:                 "is not a URI with a scheme",
		`{"server":"res","uri":"koe-test://rooms/{room}"}`:   "fill in a template's variables",
		`{"server":"res","uri":"koe-test://x","path":"/"}`:   `unknown field "path"`,
		`{"server":"res","uri":"koe-test://missing"}`:        "MCP server res, reading koe-test://missing",
		`["res"]`: "not a JSON object",
	} {
		if _, err := call(t, tb, ReadResourceTool, args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("read_resource(%s): %v, want %q", args, err, want)
		}
	}
	// The model's result is bounded like any tool's.
	m2, _ := startManager(t, Config{Servers: map[string]ServerConfig{"res": resourceServer()}, MaxResultChars: 300, ResourceLimits: ResourceLimits{MaxResourceBytes: 8 << 20}}, defaultTiming)
	tb2 := m2.Toolbox([]string{"res"})
	waitForTool(t, m2, tb2, ReadResourceTool)
	if out := mustCall(t, tb2, ReadResourceTool, `{"server":"res","uri":"koe-test://files/huge.txt"}`); len([]rune(out)) > 300 || !strings.Contains(out, "mcp_max_result_chars") {
		t.Errorf("a large resource, cut: %d characters: %q", len([]rune(out)), out)
	}
	m.Close()
	m2.Close()
}

// Resource links in a tool's result are read from the same server and put
// in the result, up to mcp_max_resource_links; one that cannot be read
// says why.
func TestResourceLinksResolved(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, _ := startManager(t, Config{Servers: map[string]ServerConfig{"res": resourceServer()},
		ResourceLimits: ResourceLimits{MaxResourceLinks: 4}}, defaultTiming)
	tb := m.Toolbox([]string{"res"})
	waitForTool(t, m, tb, "res__links")
	out := mustCall(t, tb, "res__links", `{}`)
	for _, want := range []string{
		"see:",
		"[resource koe-test://notes/cat]\n# The cat",
		"Biscuit",
		"[resource koe-test://files/logo.png, image/png, 2 KB]",
		"[resource koe-test://rooms/attic]\nThe attic has a round window.",
		"[resource link koe-test://missing (missing): not read: MCP server res, reading koe-test://missing",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the result lacks %q:\n%s", want, out)
		}
	}

	// Over the limit, the links stay links.
	m1, _ := startManager(t, Config{Servers: map[string]ServerConfig{"res": resourceServer()},
		ResourceLimits: ResourceLimits{MaxResourceLinks: 1}}, defaultTiming)
	tb1 := m1.Toolbox([]string{"res"})
	waitForTool(t, m1, tb1, "res__links")
	out = mustCall(t, tb1, "res__links", `{}`)
	if !strings.Contains(out, "Biscuit") || !strings.Contains(out, "[resource link koe-test://rooms/attic (attic)]") || strings.Contains(out, "round window") {
		t.Errorf("one link resolved of four:\n%s", out)
	}
	// -1: none.
	m0, _ := startManager(t, Config{Servers: map[string]ServerConfig{"res": resourceServer()},
		ResourceLimits: ResourceLimits{MaxResourceLinks: -1}}, defaultTiming)
	tb0 := m0.Toolbox([]string{"res"})
	waitForTool(t, m0, tb0, "res__links")
	if out = mustCall(t, tb0, "res__links", `{}`); strings.Contains(out, "Biscuit") || !strings.Contains(out, "[resource link koe-test://notes/cat (cat.md)]") {
		t.Errorf("no link resolved:\n%s", out)
	}
	m.Close()
	m1.Close()
	m0.Close()
}

// deliveries collects what FollowResources delivers.
type deliveries chan ReadResource

func (d deliveries) got(_ context.Context, r ReadResource) { d <- r }

// next waits for the next delivery.
func (d deliveries) next(t *testing.T) ReadResource {
	t.Helper()
	select {
	case r := <-d:
		return r
	case <-time.After(hangGuard):
		t.Fatal("no resource delivered")
		return ReadResource{}
	}
}

// A followed resource is delivered when the server connects, again when
// the server says it was updated, and again after the server restarts.
func TestFollowResources(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, _, gate, d, stop := followNotes(t, time.Nanosecond)
	r := d.next(t)
	if r.Err != nil || r.URI != "koe-test://notes/cat" || r.Name != "cat.md" || r.MIMEType != "text/markdown" || !strings.Contains(string(r.Data), "Biscuit") {
		t.Fatalf("first delivery: %+v %q", r, r.Data)
	}
	tb := m.Toolbox([]string{"res"})
	mustCall(t, tb, "res__set_note", `{"text":"The cat is called Whiskers now."}`)
	if r = d.next(t); !strings.Contains(string(r.Data), "Whiskers") {
		t.Fatalf("after the update: %+v %q", r, r.Data)
	}
	// A note added changes the list: the pattern matches it, and it alone
	// is read.
	mustCall(t, tb, "res__add_note", `{"name":"dog"}`)
	if r = d.next(t); r.URI != "koe-test://notes/dog" || string(r.Data) != "A note on the dog." {
		t.Fatalf("after a note was added: %+v %q", r, r.Data)
	}
	// A crash: the server comes back, and the resource is read again.
	if _, err := call(t, tb, "res__crash", `{}`); err == nil {
		t.Error("crash: no error")
	}
	gate.next(t)()
	if r = d.next(t); r.Err != nil || !strings.Contains(string(r.Data), "Biscuit") {
		t.Fatalf("after the restart: %+v %q", r, r.Data)
	}
	// Subscribed on the new session too.
	mustCall(t, tb, "res__set_note", `{"text":"Pebble."}`)
	if r = d.next(t); !strings.Contains(string(r.Data), "Pebble") {
		t.Fatalf("after the second update: %+v %q", r, r.Data)
	}
	stop()
	if err := m.FollowResources(context.Background(), ResourceSelection{Server: "nope", URIs: []string{"x://y"}}, d.got); err == nil {
		t.Error("an unknown server followed")
	}
	m.Close()
}

// A resource updated again within mcp_resource_min_refresh of its last
// reading is held, not read; a new session reads it at once.
func TestFollowResourcesPaced(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	gate := newGate()
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"res": resourceServer()},
		ResourceLimits: ResourceLimits{MinRefresh: time.Hour}}, gate.timing(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	d := make(deliveries, 8)
	done := make(chan error, 1)
	go func() {
		done <- m.FollowResources(ctx, ResourceSelection{Server: "res", URIs: []string{"koe-test://notes/cat"}}, d.got)
	}()
	if r := d.next(t); !strings.Contains(string(r.Data), "Biscuit") {
		t.Fatalf("first delivery: %+v", r)
	}
	tb := m.Toolbox([]string{"res"})
	mustCall(t, tb, "res__set_note", `{"text":"Whiskers."}`)
	const held = "MCP resource updated again within mcp_resource_min_refresh; read later"
	testkit.Eventually(t, "the update held", func() bool { return rec.count(slog.LevelDebug, held) == 1 })
	if len(d) != 0 {
		t.Fatalf("read within the interval: %+v", <-d)
	}
	if _, err := call(t, tb, "res__crash", `{}`); err == nil {
		t.Error("crash: no error")
	}
	gate.next(t)()
	// The restarted server has its first note again; read at once.
	if r := d.next(t); !strings.Contains(string(r.Data), "Biscuit") {
		t.Fatalf("after the restart: %+v %q", r, r.Data)
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	m.Close()
}

// pace lets a resource be read once per interval, and hands back the
// held ones when their time comes.
func TestPace(t *testing.T) {
	p := newPace(10 * time.Second)
	defer p.stop()
	t0 := time.Unix(1000, 0)
	if got := p.ready([]string{"a", "b"}, t0); strings.Join(got, ",") != "a,b" {
		t.Fatalf("first: %q", got)
	}
	p.read("a", t0)
	p.read("b", t0.Add(4*time.Second))
	if got := p.ready([]string{"a", "b"}, t0.Add(5*time.Second)); len(got) != 0 || p.wake() == nil {
		t.Fatalf("within the interval: %q, timer %v", got, p.wake())
	}
	if got := p.due(t0.Add(10 * time.Second)); strings.Join(got, ",") != "a" {
		t.Errorf("at 10 s: %q", got)
	}
	if p.wake() == nil {
		t.Error("b is held and no timer is set")
	}
	if got := p.due(t0.Add(14 * time.Second)); strings.Join(got, ",") != "b" {
		t.Errorf("at 14 s: %q", got)
	}
	if p.wake() != nil {
		t.Error("a timer with nothing held")
	}
	p.reset()
	if got := p.ready([]string{"a"}, t0.Add(15*time.Second)); strings.Join(got, ",") != "a" {
		t.Errorf("after a reset: %q", got)
	}
}

func TestResourceLimitsConfig(t *testing.T) {
	for _, c := range []struct {
		l    ResourceLimits
		want string
	}{
		{ResourceLimits{MaxResources: -1}, "mcp_max_resources -1 is out of range"},
		{ResourceLimits{MaxResourceBytes: 10}, "mcp_max_resource_bytes 10 is out of range"},
		{ResourceLimits{MaxResourceLinks: -2}, "mcp_max_resource_links -2 is out of range"},
		{ResourceLimits{MaxSubscriptions: maxSubscriptions + 1}, "mcp_max_subscriptions 10001 is out of range"},
		{ResourceLimits{MinRefresh: -time.Second}, "mcp_resource_min_refresh -1s is negative"},
	} {
		err := Config{ResourceLimits: c.l}.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.l, err, c.want)
		}
	}
	if err := (Config{ResourceLimits: ResourceLimits{MaxResourceLinks: -1, MaxResourceBytes: 4096}}).Validate(); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		sel  ResourceSelection
		want string
	}{
		{ResourceSelection{Server: "s"}, "name uris or match patterns"},
		{ResourceSelection{Server: "s", URIs: []string{"no-scheme"}}, "not a URI with a scheme"},
		{ResourceSelection{Server: "s", Match: []string{"x://[a"}}, "is not a pattern"},
	} {
		if err := c.sel.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.sel, err, c.want)
		}
	}
}
