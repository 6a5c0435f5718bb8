package histories

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTitle(t *testing.T) {
	long := strings.Repeat("x", 60)
	for _, c := range []struct{ opening, want string }{
		{"", ""},
		{"   ", ""},
		{"Hello koe", "Hello koe"},
		{"  what is\n\tthe   weather? ", "what is the weather?"},
		// Cut after the last whole word that fits, marked.
		{"Tell me about the lighthouse keeper who counted every wave of the sea", "Tell me about the lighthouse keeper who counted…"},
		{long + " tail", strings.Repeat("x", 48) + "…"},
		{"übung " + strings.Repeat("ä", 44) + " more", "übung…"},
	} {
		got := Title(c.opening)
		if got != c.want {
			t.Errorf("Title(%q) = %q, want %q", c.opening, got, c.want)
		}
		if n := utf8.RuneCountInString(strings.TrimSuffix(got, "…")); n > titleRunes {
			t.Errorf("Title(%q) has %d runes, more than %d", c.opening, n, titleRunes)
		}
	}
}
