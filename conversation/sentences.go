package conversation

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// sentenceCutter turns a token stream into display sentences. It keeps the
// whitespace that follows a sentence end in that sentence, so that the
// pieces concatenate back to exactly the streamed text (the OLV chat bubble
// joins them as sent).
type sentenceCutter struct {
	buf strings.Builder
}

// Push adds a delta and returns the sentences it completed, in order.
func (c *sentenceCutter) Push(delta string) []string {
	var out []string
	for len(delta) > 0 {
		// Copy the original bytes rather than the decoded rune: invalid
		// UTF-8 (or a rune split across deltas) would otherwise come back
		// as U+FFFD and the pieces would no longer join to the input.
		r, size := utf8.DecodeRuneInString(delta)
		c.buf.WriteString(delta[:size])
		delta = delta[size:]
		if c.endsSentence(r) {
			out = append(out, c.buf.String())
			c.buf.Reset()
		}
	}
	return out
}

// Flush returns the unfinished tail, if any.
func (c *sentenceCutter) Flush() string {
	s := c.buf.String()
	c.buf.Reset()
	return s
}

// endsSentence decides after r was appended. Full-width marks end a
// sentence at once; ASCII marks only when followed by whitespace, which
// keeps decimals (3.14) and most abbreviations intact.
func (c *sentenceCutter) endsSentence(r rune) bool {
	switch r {
	case '。', '！', '？', '…':
		return true
	}
	if !unicode.IsSpace(r) {
		return false
	}
	// Only the rune right before this whitespace matters; looking at just
	// that one keeps long whitespace runs linear instead of quadratic.
	s := c.buf.String()
	body := s[:len(s)-utf8.RuneLen(r)]
	last, _ := utf8.DecodeLastRuneInString(body)
	switch last {
	case '!', '?':
		return true
	case '.':
		return !isAbbreviation(body)
	}
	return false
}

var abbreviations = map[string]bool{
	"mr.": true, "mrs.": true, "ms.": true, "dr.": true, "st.": true, "prof.": true,
	"e.g.": true, "i.e.": true, "etc.": true, "vs.": true, "jr.": true, "sr.": true,
}

func isAbbreviation(body string) bool {
	word := body[strings.LastIndexFunc(body, unicode.IsSpace)+1:]
	return abbreviations[strings.ToLower(strings.TrimLeft(word, "(\"'"))]
}
