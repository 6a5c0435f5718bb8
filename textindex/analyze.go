package textindex

import (
	"unicode"
	"unicode/utf8"
)

// Terms analyses text for indexing and querying. It lowercases (Unicode
// aware) and splits on anything that is not a letter or digit; an apostrophe
// inside a word joins it ("don't" -> "dont") and a trailing possessive "'s"
// is dropped ("Caroline's" -> "caroline"). It drops English stop words and
// one-letter words, except digits and CJK characters (one of which can be a
// whole word). Words of ASCII letters are stemmed with the Snowball English
// (Porter2) stemmer ("painting" -> "paint"); numbers, words mixing letters
// and digits, and words with letters outside ASCII (accents, CJK) stay as
// they are, lowercased: the English stemmer's rules mean nothing to them.
//
// Index and query text must go through the same function, so that a query
// word meets the form it was indexed under.
func Terms(text string) []string {
	return terms(text, stems.stem)
}

// terms is Terms with stem, which must give english.Stem of a word of
// lowercase ASCII letters, as the stemmer: tests compare the cache with
// the stemmer itself.
func terms(text string, stem func(word []byte) string) []string {
	var out []string
	tokenize(text, func(tok []byte) {
		if utf8.RuneCount(tok) == 1 {
			if r, _ := utf8.DecodeRune(tok); !unicode.IsDigit(r) && !isSyllabic(r) {
				return
			}
		}
		if _, stop := stopWords[string(tok)]; stop {
			return
		}
		if asciiLetters(tok) {
			out = append(out, stem(tok))
			return
		}
		out = append(out, string(tok))
	})
	return out
}

// Words is the lowercased words of text, split like Terms splits them, with
// no stop words removed and nothing stemmed: what a caller matches names
// ("Caroline") against.
func Words(text string) []string {
	var out []string
	tokenize(text, func(tok []byte) {
		out = append(out, string(tok))
	})
	return out
}

// tokenize calls emit with each lowercased word of text, in a slice it
// reuses for the next word.
func tokenize(text string, emit func(tok []byte)) {
	var buf [64]byte
	tok := buf[:0]
	flush := func() {
		if len(tok) > 0 {
			emit(tok)
		}
		tok = tok[:0]
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9'):
			tok = append(tok, byte(r))
		case r < utf8.RuneSelf && r >= 'A' && r <= 'Z':
			tok = append(tok, byte(r+'a'-'A'))
		case r < utf8.RuneSelf && r != '\'':
			flush()
		case isApostrophe(r):
			if len(tok) == 0 {
				continue // a quote mark, not part of a word
			}
			next, nsize := utf8.DecodeRuneInString(text[i:])
			if next == 's' || next == 'S' {
				after, _ := utf8.DecodeRuneInString(text[i+nsize:])
				if i+nsize == len(text) || !isWordRune(after) {
					i += nsize // possessive: "Caroline's" is about Caroline
					flush()
					continue
				}
			}
			if i == len(text) || !unicode.IsLetter(next) && !unicode.IsDigit(next) {
				flush() // a closing quote or a plural possessive ("the twins'")
			}
			// otherwise the apostrophe joins: "don't" -> "dont"
		case unicode.IsLetter(r) || unicode.IsDigit(r) || len(tok) > 0 && isMark(r):
			// Combining marks continue a word so that decomposed accents
			// and the vowel signs of Indic scripts do not cut words apart.
			tok = utf8.AppendRune(tok, unicode.ToLower(r))
		default:
			flush()
		}
	}
	flush()
}

func isApostrophe(r rune) bool {
	return r == '\'' || r == '\u2019' || r == '\u02bc'
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || isMark(r)
}

func isMark(r rune) bool {
	return unicode.Is(unicode.M, r)
}

// asciiLetters reports whether tok is a word the English stemmer is made
// for: lowercase ASCII letters only.
func asciiLetters(tok []byte) bool {
	for _, c := range tok {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// isSyllabic reports whether r is written in a script where one character
// can be a word of its own (猫, "cat"), unlike a letter of an alphabet.
func isSyllabic(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}
