package agent_test

import (
	"strings"
	"testing"

	"koe/agent"
)

// FuzzFillNames: the names go in exactly where strings.Replacer would put
// them, whatever the prompt and the names hold (braces, the placeholders
// themselves).
func FuzzFillNames(f *testing.F) {
	f.Add(agent.DefaultSystemPrompt, "Testa", "Ann")
	f.Add("You are {character}. {human} is listening.", "", "")
	f.Add("{{character}}{human{human}}{", "{human}", "{character}")
	f.Add("{charact{character}er}", "{", "}")
	f.Fuzz(func(t *testing.T, text, character, human string) {
		want := strings.NewReplacer("{character}", fillNamesDefault(character, "the assistant"), "{human}", fillNamesDefault(human, "the user")).Replace(text)
		if got := agent.FillNames(text, character, human); got != want {
			t.Fatalf("FillNames(%q, %q, %q) = %q, want %q", text, character, human, got, want)
		}
	})
}

func fillNamesDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// BenchmarkFillNames fills the default system prompt, as every request does.
func BenchmarkFillNames(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = agent.FillNames(agent.DefaultSystemPrompt, "Testa", "Ann")
	}
}
