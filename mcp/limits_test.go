package mcp

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

// A tool whose schema is larger than mcp_max_schema_bytes is left out,
// and the log names it and the key; the server's other tools stay.
func TestSchemaLimit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, rec := startManager(t, Config{Servers: map[string]ServerConfig{"s": stdio("-wide")}, MaxSchemaBytes: 2048}, defaultTiming)
	tb := m.Toolbox([]string{"s"})
	waitForTool(t, m, tb, "s__echo")
	if hasTool(tb, "s__wide") {
		t.Error("the wide tool is offered")
	}
	left, found := rec.find(slog.LevelWarn, "MCP tool left out: its input schema is larger than mcp_max_schema_bytes")
	if !found || left.attrs["tool"] != "wide" || left.attrs["mcp_max_schema_bytes"] != "2048" {
		t.Errorf("logged %+v", left)
	}
	m.Close()

	// Under the default it is offered.
	m, _ = startManager(t, Config{Servers: map[string]ServerConfig{"s": stdio("-wide")}}, defaultTiming)
	waitForTool(t, m, m.Toolbox([]string{"s"}), "s__wide")
	m.Close()
}
