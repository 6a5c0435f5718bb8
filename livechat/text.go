package livechat

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// cleanText makes chat text safe for one line of a prompt: invalid UTF-8,
// control and invisible format characters go, every run of white space
// (newlines included) becomes one space, and the result is cut to max
// characters on a rune boundary.
func cleanText(s string, max int) string {
	s = strings.ToValidUTF8(s, "")
	var b strings.Builder
	space := false
	n := 0
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r), r == utf8.RuneError:
			continue
		}
		if space {
			if n+1 >= max {
				break
			}
			b.WriteByte(' ')
			n++
			space = false
		}
		if n >= max {
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// cleanName makes a viewer's name safe inside "viewer %s says": letters,
// digits, marks and _ - . stay; white space becomes _; everything else
// (colons, quotes, newlines, control characters) goes. Cut to max runes.
func cleanName(s string, max int) string {
	s = strings.ToValidUTF8(s, "")
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n >= max {
			break
		}
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.Is(unicode.Mn, r), r == '_', r == '-', r == '.':
		case unicode.IsSpace(r):
			r = '_'
		default:
			continue
		}
		b.WriteRune(r)
		n++
	}
	return strings.Trim(b.String(), "_")
}

// normWords splits s into normalised words for the word filter:
// compatibility-decomposed (full-width and styled letters become plain
// ones), accents and invisible characters removed, lower-cased; a word is
// a run of letters and digits.
func normWords(s string) []string {
	s = norm.NFKD.String(strings.ToValidUTF8(s, ""))
	var words []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Mn, r), unicode.Is(unicode.Cf, r):
			// accents and zero-width characters do not split a word
		case unicode.IsLetter(r), unicode.IsDigit(r):
			cur.WriteRune(unicode.ToLower(r))
		default:
			flush()
		}
	}
	flush()
	return words
}

// wordFilter matches whole words or phrases after normalisation.
type wordFilter [][]string

func newWordFilter(list []string) wordFilter {
	var f wordFilter
	for _, w := range list {
		if ws := normWords(w); len(ws) > 0 {
			f = append(f, ws)
		}
	}
	return f
}

// match reports whether text holds one of the filter's words or phrases.
func (f wordFilter) match(text string) bool {
	if len(f) == 0 {
		return false
	}
	words := normWords(text)
	for _, phrase := range f {
		for i := 0; i+len(phrase) <= len(words); i++ {
			ok := true
			for j, w := range phrase {
				if words[i+j] != w {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
	}
	return false
}
