package mcp

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

var functionName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func TestToolName(t *testing.T) {
	long := strings.Repeat("x", 40)
	for _, tc := range []struct {
		server, tool string
		want         string // "" = hashed: check the shape only
	}{
		{"time", "get_current_time", "time__get_current_time"},
		{"everything", "get-sum", "everything__get-sum"},
		{"a", strings.Repeat("t", 61), "a__" + strings.Repeat("t", 61)},
		{"a", strings.Repeat("t", 62), ""},
		{"fs", "read.file", ""},
		{"fs", "_hidden", ""},
		{"fs", "名前", ""},
		{strings.Repeat("s", 32), long, ""},
	} {
		got := toolName(tc.server, tc.tool)
		if !functionName.MatchString(got) {
			t.Errorf("%s/%s → %q breaks the function-name rules", tc.server, tc.tool, got)
		}
		if server, ok := serverOf(got); !ok || server != tc.server {
			t.Errorf("%q: server %q, want %q", got, server, tc.server)
		}
		switch {
		case tc.want != "" && got != tc.want:
			t.Errorf("%s/%s → %q, want %q", tc.server, tc.tool, got, tc.want)
		case tc.want == "" && !regexp.MustCompile(`_?[0-9a-f]{8}$`).MatchString(got):
			t.Errorf("%s/%s → %q, want a hashed name", tc.server, tc.tool, got)
		}
	}
	if got := toolName("fs", "read.file"); !strings.HasPrefix(got, "fs__read_file_") {
		t.Errorf("read.file → %q, want it readable", got)
	}
	// Names that differ only where they were made to fit stay apart.
	if toolName("fs", "read.file") == toolName("fs", "read file") || toolName("a", long+"1") == toolName("a", long+"2") {
		t.Error("two tools got one name")
	}
}

// Any server name Validate allows and any tool name give a function name
// whose server part is the server: tools of two servers never collide.
func TestToolNameProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcXYZ019_-."
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	seen := map[string]string{}
	for i := 0; i < 20000; i++ {
		server := strings.ReplaceAll(word(1+r.IntN(32)), ".", "x")
		if checkServer(server, ServerConfig{Command: "x"}) != nil {
			continue
		}
		tool := word(1 + r.IntN(80))
		got := toolName(server, tool)
		if !functionName.MatchString(got) {
			t.Fatalf("%q/%q → %q", server, tool, got)
		}
		if s, _ := serverOf(got); s != server {
			t.Fatalf("%q/%q → %q, whose server part is %q", server, tool, got, s)
		}
		key := fmt.Sprintf("%s/%s", server, tool)
		if other, ok := seen[got]; ok && other != key {
			t.Fatalf("%s and %s both → %q", other, key, got)
		}
		seen[got] = key
	}
}
