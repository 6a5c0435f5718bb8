package conversation

import "testing"

func TestWordsOf(t *testing.T) {
	for _, c := range []struct {
		text  string
		share float64
		want  string
	}{
		{"Four five six.", 0.5, "Four"},
		{"Four five six.", 0.65, "Four five"}, // at the space after "five"
		{"Four five six.", 0.3, "Four"},
		{"Four five six.", 0.2, ""},
		{"Four five six.", 1, "Four five six."},
		{"Four five six.", 0, ""},
		{"こんにちは世界", 0.5, "こんに"},
		{"", 0.5, ""},
	} {
		if got := wordsOf(c.text, c.share); got != c.want {
			t.Errorf("wordsOf(%q, %v) = %q, want %q", c.text, c.share, got, c.want)
		}
	}
}
