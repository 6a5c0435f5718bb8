package textindex

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestTerms(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"empty", "", nil},
		{"only spaces and punctuation", "  ,.!? -- ''", nil},
		{"stop words only", "I was there and you were with me", nil},
		{"content survives stop words", "I painted my dog", []string{"paint", "dog"}},
		{"running stems to run", "running", []string{"run"}},
		{"mixed case", "RuNNing DOG", []string{"run", "dog"}},
		{"possessive is dropped", "Caroline's", Terms("Caroline")},
		{"curly possessive is dropped", "Caroline’s", Terms("Caroline")},
		{"capital possessive", "CAROLINE'S", Terms("caroline")},
		{"apostrophe joins", "don't won't", nil}, // "dont", "wont": stop words
		{"apostrophe joins content", "rock'n'roll", []string{"rocknrol"}},
		{"plural possessive", "the twins' room", []string{"twin", "room"}},
		{"quotes are not apostrophes", "'pottery'", []string{"potteri"}},
		{"it's is it", "it's mine", nil},
		{"numbers stay", "in 2023 we had 3 cats", []string{"2023", "3", "cat"}},
		{"one-letter words go, digits stay", "x y 7 z", []string{"7"}},
		{"letters and digits", "mp3 4th", []string{"mp3", "4th"}},
		{"accent lowercased, not stemmed", "Café", []string{"café"}},
		{"decomposed accent stays one word", "cafe\u0301s", []string{"cafe\u0301s"}},
		{"CJK passes through", "東京 に 行った", []string{"東京", "に", "行った"}},
		{"one ideograph is a word", "猫", []string{"猫"}},
		{"one Greek letter is not", "α β", nil},
		{"split on symbols", "dog/cat+bird@home", []string{"dog", "cat", "bird", "home"}},
		{"names are content", "Melanie told Caroline", []string{"melani", "told", "carolin"}},
		{"may and will are kept", "Will may come", []string{"will", "may", "come"}},
		{"invalid utf-8 splits", "dog\xffcat", []string{"dog", "cat"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Terms(c.text)
			if !slices.Equal(got, c.want) {
				t.Errorf("Terms(%q) = %q, want %q", c.text, got, c.want)
			}
		})
	}
}

func TestTermsShareStems(t *testing.T) {
	groups := [][]string{
		{"paint", "painted", "painting", "paints"},
		{"run", "running", "runs"},
		{"camp", "camping", "camped", "camps"},
		{"adopt", "adopted", "adoption"},
		{"Caroline", "Caroline's", "caroline’s"},
	}
	for _, g := range groups {
		want := Terms(g[0])
		if len(want) != 1 {
			t.Fatalf("Terms(%q) = %q, want one term", g[0], want)
		}
		for _, w := range g[1:] {
			if got := Terms(w); !slices.Equal(got, want) {
				t.Errorf("Terms(%q) = %q, want %q like %q", w, got, want, g[0])
			}
		}
	}
	// Stemming must not merge words that differ in meaning.
	if slices.Equal(Terms("paint"), Terms("pain")) {
		t.Errorf("paint and pain share a stem")
	}
}

func TestWords(t *testing.T) {
	cases := []struct {
		text string
		want []string
	}{
		{"", nil},
		{"Did Caroline's DOG run?", []string{"did", "caroline", "dog", "run"}},
		{"I don't know", []string{"i", "dont", "know"}},
		{"Painting in 2023, a café", []string{"painting", "in", "2023", "a", "café"}},
	}
	for _, c := range cases {
		if got := Words(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Words(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

func TestStopWordsAreLowercaseWords(t *testing.T) {
	// An entry the tokenizer cannot produce would never match anything.
	for w := range stopWords {
		if got := Words(w); len(got) != 1 || got[0] != w {
			t.Errorf("stop word %q tokenizes to %q", w, got)
		}
	}
	if n := len(stopWords); n < 120 || n > 200 {
		t.Errorf("%d stop words; the list is meant to hold the ~150 common function words", n)
	}
}

func FuzzTerms(f *testing.F) {
	for _, s := range []string{"", "Caroline's dog", "don't", "東京 2023", "CAFÉ'S", "'s's'", "a\u0301'\u0301", "\xff'S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, fn := range []func(string) []string{Terms, Words} {
			for _, term := range fn(text) {
				if term == "" {
					t.Fatalf("empty term from %q", text)
				}
				if !utf8.ValidString(term) {
					t.Fatalf("term %q from %q is not UTF-8", term, text)
				}
				if strings.ContainsFunc(term, func(r rune) bool { return unicode.IsSpace(r) || unicode.ToLower(r) != r }) {
					t.Fatalf("term %q from %q holds a space or a capital", term, text)
				}
			}
		}
	})
}
