package sentence

import (
	"unicode"
	"unicode/utf8"
)

// Character classes used by the splitter and the speech cleaner. ASCII takes
// a fast path everywhere: most of an English reply never reaches the
// unicode tables.

func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || r == '\n' || r == '\t' || r == '\r' || r == '\v' || r == '\f'
	}
	// The White_Space property, without a table search for every CJK rune.
	switch {
	case r <= 0xFF:
		return r == 0x85 || r == 0xA0
	case r < 0x1680:
		return false
	}
	return r == 0x1680 || 0x2000 <= r && r <= 0x200A || r == 0x2028 || r == 0x2029 ||
		r == 0x202F || r == 0x205F || r == 0x3000
}

// isWordRune reports a letter or digit in any script: what makes text
// speakable.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	if isCJK(r) || isHangul(r) {
		return true
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isASCIIDigit(r rune) bool { return '0' <= r && r <= '9' }

// isCJK reports Han ideographs and kana: scripts written without spaces,
// where any two characters have a word boundary between them.
func isCJK(r rune) bool {
	switch {
	case r < 0x3040:
		return false
	case r <= 0x30FF: // hiragana, katakana, ー
		return true
	case 0x3400 <= r && r <= 0x4DBF, 0x4E00 <= r && r <= 0x9FFF, 0xF900 <= r && r <= 0xFAFF:
		return true
	case 0xFF66 <= r && r <= 0xFF9D: // half-width katakana
		return true
	case 0x20000 <= r && r <= 0x3FFFF:
		return true
	}
	return false
}

func isHangul(r rune) bool {
	return 0xAC00 <= r && r <= 0xD7A3 || 0x1100 <= r && r <= 0x11FF || 0x3130 <= r && r <= 0x318F
}

// isFullStop reports the full-width sentence ends, which need no space
// after them (Chinese and Japanese put none).
func isFullStop(r rune) bool {
	switch r {
	case '。', '！', '？', '…', '｡', '‼', '⁇', '⁈', '⁉':
		return true
	}
	return false
}

// isCloser reports what may follow an end mark and still belong to its
// sentence: closing quotes and brackets, markdown emphasis closing around a
// sentence ("**Done.**"), and emoji ("Great job!🎉").
func isCloser(r rune) bool {
	switch r {
	case '"', '\'', ')', ']', '}', '*', '_', '`',
		'”', '’', '」', '』', '）', '】', '》', '〉', '»', '›', '〕', '〗', '〙', '〛', '｣', '］', '｝':
		return true
	}
	return r >= utf8.RuneSelf && isEmoji(r)
}

// isEmoji reports pictographs and the invisible parts of emoji sequences:
// other symbols (So, which covers pictographs, dingbats and flags), skin
// tones, the zero-width joiner, variation selectors, the keycap and tag
// characters. The degree sign is So too but is spoken ("25°C").
func isEmoji(r rune) bool {
	switch {
	case r < 0xA0, r == '°', isCJK(r), isHangul(r):
		return false
	case r == 0x200D, r == 0x20E3, 0xFE00 <= r && r <= 0xFE0F,
		0x1F3FB <= r && r <= 0x1F3FF, 0xE0020 <= r && r <= 0xE007F:
		return true
	}
	return unicode.Is(unicode.So, r)
}

// wordKind says what an ASCII period followed by whitespace means after a
// given word.
type wordKind uint8

const (
	wordEnds             wordKind = iota // the period ends the sentence
	wordAbbrev                           // Mr. e.g. U.S. J. 1. (list marker): it does not
	wordEndsUnlessNumber                 // "No.": ends, except in "No. 5"
)

// classifyWord looks at the word that ends with a single period (the period
// included). lineStart says the word opens its line or piece, where "1." is
// a list marker rather than a sentence ending in a number.
func classifyWord(word []byte, lineStart bool) wordKind {
	word = word[:len(word)-1] // the period
	for len(word) > 0 {
		r, n := utf8.DecodeRune(word)
		if r != '(' && r != '"' && r != '\'' && r != '[' && r != '*' && r != '_' &&
			r != '“' && r != '‘' && r != '（' && r != '「' {
			break
		}
		lineStart = false // "(1." is not a list marker
		word = word[n:]
	}
	if len(word) == 0 || len(word) > 8 {
		return wordEnds
	}
	digits := true
	for _, c := range word {
		if c < '0' || c > '9' {
			digits = false
			break
		}
	}
	if digits {
		if lineStart && len(word) <= 3 {
			return wordAbbrev
		}
		return wordEnds
	}
	// A single capital is an initial ("J. K. Rowling"), except the pronoun,
	// which ends sentences all the time ("So do I.").
	if len(word) == 1 && 'A' <= word[0] && word[0] <= 'Z' && word[0] != 'I' {
		return wordAbbrev
	}
	var low [8]byte
	for i, c := range word {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	switch string(low[:len(word)]) {
	case "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc":
		return wordAbbrev
	case "no":
		return wordEndsUnlessNumber
	}
	// Letters joined by periods: e.g, i.e, a.m, p.m, U.S, U.S.A.
	if len(word) >= 3 && len(word)%2 == 1 {
		for i, c := range low[:len(word)] {
			if i%2 == 1 && c != '.' || i%2 == 0 && (c < 'a' || c > 'z') {
				return wordEnds
			}
		}
		return wordAbbrev
	}
	return wordEnds
}

// isPlainWord reports whether word (opening quotes and brackets allowed
// in front) is made of letters, with apostrophes and hyphens inside, and is
// longer than one letter unless it is the pronoun "I" or a CJK character.
// Digits, dots, slashes, colons and @ make it a number, an abbreviation, a
// path, a URL or an address, where a period may not end a sentence.
func isPlainWord(word []byte) bool {
	word = stripOpeners(word)
	letters := 0
	for i, w := 0, 0; i < len(word); i += w {
		var r rune
		r, w = utf8.DecodeRune(word[i:])
		switch {
		case unicode.IsLetter(r):
			letters++
		case (r == '\'' || r == '’' || r == '-') && letters > 0 && i+w < len(word):
		default:
			return false
		}
	}
	if letters == 1 {
		r, _ := utf8.DecodeRune(word)
		return r == 'I' || isCJK(r) || isHangul(r)
	}
	return letters > 1
}

// stripOpeners drops the quotes, brackets and emphasis marks word starts
// with.
func stripOpeners(word []byte) []byte {
	for len(word) > 0 {
		r, n := utf8.DecodeRune(word)
		if !isOpener(r) {
			break
		}
		word = word[n:]
	}
	return word
}

// isOpener reports whether r opens a quotation, a bracket or emphasis in
// front of a word.
func isOpener(r rune) bool {
	switch r {
	case '(', '"', '\'', '[', '*', '_', '“', '‘', '（', '「', '『', '«':
		return true
	}
	return false
}

// dotRun counts the periods of a mark run (closers after it excluded).
func dotRun(b []byte) int {
	n := 0
	for n < len(b) && b[n] == '.' {
		n++
	}
	return n
}

// trailers is the length of the whitespace and emoji b starts with: what
// follows a sentence end and would have joined it.
func trailers(b []byte) int {
	i := 0
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if !isSpace(r) && !(r >= utf8.RuneSelf && isEmoji(r)) {
			break
		}
		i += n
	}
	return i
}

// equalFold reports whether b is s, ASCII case-insensitively.
func equalFold(b []byte, s string) bool { return len(b) == len(s) && equalFoldPrefix(b, s) }

// equalFoldPrefix reports whether b starts like s (ASCII case-insensitive),
// comparing only as many bytes as both have.
func equalFoldPrefix(b []byte, s string) bool {
	n := min(len(b), len(s))
	for i := 0; i < n; i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
