package sentence

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// speech builds a piece's speech text while the splitter scans it, one rune
// at a time, so cleaning costs nothing extra and never rescans. The bracket
// and emphasis state outlives pieces: an aside opened with "(" in one
// sentence stays silent in the next until its ")".
type speech struct {
	out     []byte // this piece's speech so far
	letters int    // letters and digits in out
	space   bool   // whitespace seen since the last spoken rune
	inWord  bool

	// The word being spoken, kept so that a URL can be taken back out once
	// the word is complete.
	wordStart   int // index in out
	wordLetters int // letters before wordStart
	urlHint     bool

	// Suppressed spans. Only parentheses and square brackets nest; "*" and
	// "<" spans also end at a newline, so a stray "*" or "<" silences one
	// line at most.
	paren  int
	square int
	star   bool
	angle  bool
	// pend is a '*', '<' or line-start '-' / '+' whose meaning depends on the
	// next rune: "*waves*" versus "5 * 3", "<b>" versus "3 < 5", "- item"
	// versus "-5".
	pend      byte
	lineStart bool
	// The two runes before this one, to tell ":(" from an aside.
	prev, prev2 rune

	// The text of the open [..], to match against the emotion keywords.
	emo    [64]byte
	emoN   int
	emoBad bool
}

// newPiece starts the speech of a new piece; the suppression state carries
// over.
func (sp *speech) newPiece() {
	sp.out = sp.out[:0]
	sp.letters = 0
	sp.space = false
	sp.inWord = false
	sp.urlHint = false
}

func (sp *speech) reset() {
	out := sp.out[:0]
	if cap(out) > maxKeep {
		out = nil
	}
	*sp = speech{out: out, lineStart: true}
}

// speak feeds one rune (b holds its bytes) and reports whether it was
// spoken. emotions are the known keywords; found ones are appended to *found.
func (sp *speech) speak(r rune, b []byte, space bool, emotions []string, found *[]string) bool {
	before, before2 := sp.prev, sp.prev2
	sp.prev, sp.prev2 = r, before
	if sp.pend != 0 {
		p := sp.pend
		sp.pend = 0
		switch p {
		case '*':
			sp.star = !space
		case '<':
			sp.angle = r == '/' || r == '!' || r == '?' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		case '-', '+':
			switch {
			case rune(p) == r:
				sp.lineStart = true // "---": a rule, not a minus
			case !space:
				sp.write(rune(p), b[:0:0], p)
			}
		}
	}
	if space {
		sp.endWord()
		sp.space = true
		if r == '\n' {
			sp.star, sp.angle = false, false
			sp.lineStart = true
		}
	}
	switch {
	case sp.square > 0:
		switch r {
		case '[':
			sp.square++
		case ']':
			sp.square--
			if sp.square == 0 {
				sp.closeSquare(emotions, found)
			}
		default:
			if sp.square == 1 {
				if sp.emoN+len(b) > len(sp.emo) {
					sp.emoBad = true
				} else {
					sp.emoN += copy(sp.emo[sp.emoN:], b)
				}
			}
		}
		return false
	case sp.paren > 0:
		switch r {
		case '(', '（':
			sp.paren++
		case ')', '）':
			sp.paren--
		case '[':
			sp.openSquare()
		}
		return false
	case sp.angle:
		sp.angle = r != '>'
		return false
	case sp.star:
		sp.star = r != '*'
		return false
	case space:
		return false
	}

	lineStart := sp.lineStart
	sp.lineStart = false
	switch r {
	case '#':
		if lineStart { // heading
			sp.lineStart = true
			return false
		}
	case '>': // quote at a line start, a stray tag end elsewhere
		sp.lineStart = lineStart
		return false
	case '-', '+':
		if lineStart { // a bullet if a space follows
			sp.pend = byte(r)
			return false
		}
	case '*', '<':
		sp.pend = byte(r)
		return false
	case '[':
		sp.openSquare()
		return false
	case '(', '（', ')':
		// ":(" and ":-(" are faces, not an aside that silences the rest;
		// faces are not spoken.
		if isFaceEyes(before) || before == '-' && isFaceEyes(before2) {
			sp.dropFace()
		} else if r != ')' {
			sp.paren = 1
		}
		return false
	case '）', ']', '`', '_', '~', '|':
		return false
	case utf8.RuneError:
		return false // invalid bytes (or U+FFFD) carry nothing to say
	}
	if r >= utf8.RuneSelf && isEmoji(r) || r < ' ' || r == 0x7F {
		sp.endWord()
		sp.space = true
		return false
	}
	if len(sp.out) == 0 && noSpaceBefore(r) {
		return false // "[joy], well" is spoken "well"
	}
	sp.write(r, b, 0)
	return true
}

func isFaceEyes(r rune) bool { return r == ':' || r == ';' || r == '=' }

// dropFace takes the eyes and nose of a face (":-" of ":-(") back out of the
// speech, with the space before them if nothing else is left of the word.
func (sp *speech) dropFace() {
	if !sp.inWord {
		return // the eyes were not spoken
	}
	n := len(sp.out)
	if n > sp.wordStart && sp.out[n-1] == '-' {
		n--
	}
	if n > sp.wordStart && isFaceEyes(rune(sp.out[n-1])) {
		n--
	}
	sp.out = sp.out[:n]
	if n == sp.wordStart {
		sp.inWord = false
		if n > 0 && sp.out[n-1] == ' ' {
			sp.out = sp.out[:n-1]
			sp.space = true
		}
	}
}

func (sp *speech) openSquare() {
	sp.square = 1
	sp.emoN = 0
	sp.emoBad = false
}

func (sp *speech) closeSquare(emotions []string, found *[]string) {
	if sp.emoBad {
		return
	}
	key := bytes.TrimSpace(sp.emo[:sp.emoN])
	for _, e := range emotions {
		if strings.EqualFold(e, string(key)) {
			*found = append(*found, e)
			return
		}
	}
}

// write appends a spoken rune (its bytes b, or the single byte c when b is
// empty), preceded by one space if whitespace came before it.
func (sp *speech) write(r rune, b []byte, c byte) {
	if sp.space {
		sp.space = false
		if len(sp.out) > 0 && !noSpaceBefore(r) {
			sp.out = append(sp.out, ' ')
		}
	}
	if !sp.inWord {
		sp.inWord = true
		sp.wordStart = len(sp.out)
		sp.wordLetters = sp.letters
		sp.urlHint = false
	}
	if len(b) == 0 {
		sp.out = append(sp.out, c)
	} else {
		sp.out = append(sp.out, b...)
	}
	if isWordRune(r) {
		sp.letters++
	} else if r == '.' || r == '/' {
		sp.urlHint = true
	}
}

// noSpaceBefore reports punctuation that should not get the space of text
// removed before it ("Hi [joy]!" is spoken "Hi!").
func noSpaceBefore(r rune) bool {
	switch r {
	case '.', ',', '!', '?', ';', ':', '。', '，', '、', '！', '？', '；', '：', '…':
		return true
	}
	return false
}

// wordHasURL reports whether the word being spoken holds a URL, which
// may go on past a mark in it ("http://x.org/?q=1").
func (sp *speech) wordHasURL() bool {
	if !sp.inWord || !sp.urlHint {
		return false
	}
	w := sp.out[sp.wordStart:]
	for i := range w {
		if (i == 0 || !asciiWord[w[i-1]]) && hasURLPrefix(w[i:]) {
			return true
		}
	}
	return false
}

// endWord completes the current word: a URL in it is not spoken (its
// trailing punctuation is).
func (sp *speech) endWord() {
	if !sp.inWord {
		return
	}
	sp.inWord = false
	if !sp.urlHint {
		return
	}
	// One compacting pass, so a word full of URLs stays linear.
	w := sp.out[sp.wordStart:]
	kept := 0
	var prev byte // the byte read before i (w is overwritten behind i)
	for i := 0; i < len(w); {
		if !asciiWord[prev] && hasURLPrefix(w[i:]) {
			j := i
			for j < len(w) && w[j] > ' ' && w[j] < utf8.RuneSelf {
				j++
			}
			for strings.IndexByte(".,!?;:'\"", w[j-1]) >= 0 {
				j-- // stops at the latest at the prefix's letters
			}
			prev = w[j-1]
			i = j
			continue
		}
		prev = w[i]
		w[kept] = w[i]
		kept++
		i++
	}
	removed := kept < len(w)
	w = w[:kept]
	if !removed {
		return
	}
	// Drop the space before what is left if the word vanished or only its
	// punctuation is left: "Visit https://x.com." speaks "Visit."
	start := sp.wordStart
	if start > 0 && sp.out[start-1] == ' ' && (len(w) == 0 || noSpaceBefore(rune(w[0]))) {
		start--
		w = append(sp.out[:start], w...)
		sp.out = w
	} else {
		sp.out = sp.out[:start+len(w)]
	}
	n := sp.wordLetters
	for _, r := range string(sp.out[start:]) {
		if isWordRune(r) {
			n++
		}
	}
	sp.letters = n
}

func hasURLPrefix(b []byte) bool {
	switch {
	case len(b) > 7 && equalFoldPrefix(b, "http://"),
		len(b) > 8 && equalFoldPrefix(b, "https://"),
		len(b) > 4 && equalFoldPrefix(b, "www."):
		return true
	}
	return false
}
