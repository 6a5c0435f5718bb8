package koetest

import (
	"testing"

	"koe/app"
	"koe/config"
	"koe/testkit/logwatch"
)

// StartKoeLogged is StartKoe with its log on a logwatch handler, for
// tests that wait for what koe logs (an MCP server connected…).
func StartKoeLogged(t testing.TB, cfg config.Config) (*app.Main, *logwatch.Handler) {
	t.Helper()
	logs := logwatch.New(t, "koe")
	m := &app.Main{Config: cfg, Logger: logs.Logger(), Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, logs
}
