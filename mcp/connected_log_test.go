package mcp

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"koe/agent"
)

// connectedProbe is a log handler that, when the manager says a server is
// connected, looks at that moment at what a character's toolbox offers.
type connectedProbe struct {
	box    chan agent.Toolbox // the toolbox, once the manager exists
	offers chan int           // how many tools it offered when told
}

func (p *connectedProbe) Enabled(context.Context, slog.Level) bool { return true }
func (p *connectedProbe) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p *connectedProbe) WithGroup(string) slog.Handler            { return p }

func (p *connectedProbe) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "MCP server connected" {
		tb := <-p.box
		p.box <- tb
		p.offers <- len(tb.Specs())
	}
	return nil
}

// "MCP server connected" is logged once the server's tools are offered:
// koe's tests (and operators) wait for that line before the first turn,
// and a turn that came between the line and the tools had none to offer,
// so that the model's call was refused as one nobody offered (the server
// tests of confirmations failed so under load).
func TestConnectedIsSaidOnceTheToolsAreOffered(t *testing.T) {
	p := &connectedProbe{box: make(chan agent.Toolbox, 1), offers: make(chan int, 1)}
	m, err := start(context.Background(), Config{Servers: map[string]ServerConfig{"test": stdio()}}, slog.New(p), defaultTiming)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p.box <- m.Toolbox([]string{"test"})
	select {
	case n := <-p.offers:
		if n == 0 {
			t.Fatal("the toolbox offered no tools when the server was said to be connected")
		}
	case <-time.After(hangGuard):
		t.Fatalf("the server was not said to be connected within %s", hangGuard)
	}
}
