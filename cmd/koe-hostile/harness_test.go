package main

import (
	"slices"
	"testing"
)

func TestRenderYAML(t *testing.T) {
	yaml, lines := renderYAML([]setting{
		{"log_level", "info"},
		{"character.tts.engine", "none"},
		{"server.max_connections", "200"},
		{"character.llm.max_reply_tokens", "64"},
		{"server.max_message_bytes", "16777216"},
	})
	want := `character:
  llm:
    max_reply_tokens: 64
  tts:
    engine: none
log_level: info
server:
  max_connections: 200
  max_message_bytes: 16777216
`
	if yaml != want {
		t.Errorf("got\n%s\nwant\n%s", yaml, want)
	}
	wantLines := map[int]string{3: "character.llm.max_reply_tokens", 5: "character.tts.engine", 6: "log_level", 8: "server.max_connections", 9: "server.max_message_bytes"}
	for n, key := range wantLines {
		if lines[n] != key {
			t.Errorf("line %d: got %q, want %q", n, lines[n], key)
		}
	}
	if len(lines) != len(wantLines) {
		t.Errorf("lines: %v", lines)
	}
}

func TestUnknownKeys(t *testing.T) {
	lines := map[int]string{3: "character.llm.max_reply_tokens", 8: "server.max_connections"}
	for name, log := range map[string]string{
		"koe today": `time=… level=ERROR msg="koe failed" err="/tmp/x/conf.yaml line 8: unknown key server.max_connections"`,
		"older koe": `ERROR koe failed err="config /tmp/x/conf.yaml: yaml: unmarshal errors:\n  line 8: field max_connections not found in type server.Config"`,
	} {
		if got := unknownKeys(log, lines); !slices.Equal(got, []string{"server.max_connections"}) {
			t.Errorf("%s: got %v", name, got)
		}
	}
	if got := unknownKeys(`conf.yaml line 3: character.llm.max_reply_tokens: expected a number, got "x"`, lines); got != nil {
		t.Errorf("a bad value is not an unknown key: got %v", got)
	}
}

func TestBombRates(t *testing.T) {
	seen := map[int]bool{}
	supported := 0
	for i := 0; i < rateBombSessions; i++ {
		r := bombRate(i)
		if seen[r] {
			t.Errorf("rate %d twice", r)
		}
		seen[r] = true
		if slices.Contains(supportedRates, r) {
			supported++
		}
	}
	if supported != len(supportedRates) {
		t.Errorf("%d supported rates, want %d", supported, len(supportedRates))
	}
}
