package bpe

import (
	"unicode"
	"unicode/utf8"
)

// class is what the split patterns ask of one character: the Unicode
// classes they name, as the patterns' regular expression engine (regexp2)
// tests them, with Go's unicode tables: \p{L}, \p{N}, \p{M}, the letter
// cases, \s as unicode.IsSpace, and \r, \n themselves.
type class uint8

const (
	cLetter  class = 1 << iota // \p{L}
	cNumber                    // \p{N}
	cSpace                     // \s
	cNewline                   // \r or \n
	// cUpper is o200k_base's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], the characters
	// that may begin a word; cLower is [\p{Ll}\p{Lm}\p{Lo}\p{M}], those that
	// may end one. Marks, modifier and "other" letters (CJK) are both.
	cUpper
	cLower
)

// asciiClass holds the classes of the 128 ASCII characters.
var asciiClass = func() (t [utf8.RuneSelf]class) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = classify(r)
	}
	return t
}()

// classOf returns the class of the character at s[i] and its length in
// bytes: 0, 0 at the end of s. s is valid UTF-8.
func classOf(s string, i int) (class, int) {
	if i >= len(s) {
		return 0, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return classify(r), n
}

func classify(r rune) class {
	switch {
	case r == '\r' || r == '\n':
		return cSpace | cNewline
	case unicode.IsLetter(r):
		// Every letter is in exactly one of the five cases.
		switch {
		case unicode.Is(unicode.Lo, r), unicode.Is(unicode.Lm, r):
			return cLetter | cUpper | cLower
		case unicode.Is(unicode.Ll, r):
			return cLetter | cLower
		default: // Lu, Lt
			return cLetter | cUpper
		}
	case unicode.IsSpace(r):
		return cSpace
	case unicode.Is(unicode.N, r):
		return cNumber
	case unicode.Is(unicode.M, r):
		return cUpper | cLower
	}
	return 0
}

// Classes the patterns build from those above.
const (
	// notOther: [^\s\p{L}\p{N}] is every character but these.
	notOther = cSpace | cLetter | cNumber
	// notPrefix: [^\r\n\p{L}\p{N}], the one character allowed before a
	// word, is every character but these.
	notPrefix = cNewline | cLetter | cNumber
)

// run returns the end of the run of characters from i that are all of
// class want (any of its bits), and how many characters it holds.
func run(s string, i int, want class) (end, count int) {
	for {
		c, n := classOf(s, i)
		if n == 0 || c&want == 0 {
			return i, count
		}
		i += n
		count++
	}
}

// otherRun is run for the characters not of class not.
func otherRun(s string, i int, not class) int {
	for {
		c, n := classOf(s, i)
		if n == 0 || c&not != 0 {
			return i
		}
		i += n
	}
}
