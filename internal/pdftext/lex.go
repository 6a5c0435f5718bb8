package pdftext

import (
	"errors"
	"fmt"
	"io"
)

// lexer splits a content stream or a character map into tokens: the
// PostScript-like syntax both share (PDF 32000-1, 7.2 and 7.8.2). It holds
// one buffer of the stream, never the whole of it, and no token grows
// past maxStringBytes.
type lexer struct {
	r   io.Reader
	buf []byte
	pos int
	// err ended the input; io.EOF is its end.
	err error
	// text holds the last string, name or keyword token's bytes.
	text []byte
}

type tokKind uint8

const (
	tokEnd tokKind = iota // no more tokens: see lexer.failure
	tokNumber
	tokString
	tokName
	tokKeyword // an operator, or true, false, null
	tokArrayOpen
	tokArrayClose
	tokDictOpen
	tokDictClose
)

// token is one token; text is valid until the next call to next.
type token struct {
	kind tokKind
	num  float64
	text []byte
}

const (
	// lexBuffer is how much of a stream is read at a time: each read is
	// metered and checks the extraction's context.
	lexBuffer = 32 << 10
	// maxStringBytes bounds one string: real ones hold a line of text;
	// one that never ends would otherwise grow with the stream.
	maxStringBytes = 1 << 20
	// maxNameBytes: PDF names are at most 127 bytes; longer ones are cut.
	maxNameBytes = 127
)

// errStringTooLong is a string over maxStringBytes.
var errStringTooLong = fmt.Errorf("a string longer than %d KiB", maxStringBytes>>10)

func newLexer(r io.Reader) *lexer {
	return &lexer{r: r, buf: make([]byte, 0, lexBuffer)}
}

// failure is why the tokens ended early: nil at the stream's end.
func (l *lexer) failure() error {
	if errors.Is(l.err, io.EOF) {
		return nil
	}
	return l.err
}

func (l *lexer) fill() bool {
	if l.err != nil {
		return false
	}
	// A reader may return nothing without an error a few times; one that
	// keeps doing so is broken.
	for range 100 {
		n, err := l.r.Read(l.buf[:cap(l.buf)])
		l.buf, l.pos = l.buf[:n], 0
		if err != nil {
			l.err = err
		}
		if n > 0 {
			return true
		}
		if err != nil {
			return false
		}
	}
	l.err = io.ErrNoProgress
	return false
}

func (l *lexer) readByte() (byte, bool) {
	if l.pos >= len(l.buf) && !l.fill() {
		return 0, false
	}
	c := l.buf[l.pos]
	l.pos++
	return c, true
}

func (l *lexer) peekByte() (byte, bool) {
	if l.pos >= len(l.buf) && !l.fill() {
		return 0, false
	}
	return l.buf[l.pos], true
}

func isWhite(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}

func isDelimiter(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return true
	}
	return false
}

// next returns the next token; tokEnd at the end or on a failure.
func (l *lexer) next() (token, error) {
	for {
		c, ok := l.readByte()
		if !ok {
			return token{kind: tokEnd}, l.failure()
		}
		switch {
		case isWhite(c):
		case c == '%':
			l.skipLine()
		case c == '(':
			return l.literal()
		case c == '<':
			if d, _ := l.peekByte(); d == '<' {
				l.pos++
				return token{kind: tokDictOpen}, nil
			}
			return l.hex()
		case c == '>':
			if d, _ := l.peekByte(); d == '>' {
				l.pos++
				return token{kind: tokDictClose}, nil
			}
		case c == '[':
			return token{kind: tokArrayOpen}, nil
		case c == ']':
			return token{kind: tokArrayClose}, nil
		case c == '/':
			return l.name(), nil
		case isDelimiter(c):
			// A stray ')' or a PostScript procedure's braces: nothing a
			// reader of text needs.
		default:
			return l.regular(c), nil
		}
	}
}

func (l *lexer) skipLine() {
	for {
		c, ok := l.readByte()
		if !ok || c == '\n' || c == '\r' {
			return
		}
	}
}

// literal reads a (string) after its '(' (7.3.4.2): nested parentheses,
// backslash escapes and octal codes.
func (l *lexer) literal() (token, error) {
	out := l.text[:0]
	depth := 1
	for {
		c, ok := l.readByte()
		if !ok {
			break // an unclosed string ends with the stream
		}
		switch c {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				l.text = out
				return token{kind: tokString, text: out}, nil
			}
		case '\\':
			c, ok = l.readByte()
			if !ok {
				break
			}
			switch c {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case '\r':
				if d, _ := l.peekByte(); d == '\n' {
					l.pos++
				}
				continue // a line continued
			case '\n':
				continue
			default:
				if c >= '0' && c <= '7' {
					v := int(c - '0')
					for range 2 {
						d, ok := l.peekByte()
						if !ok || d < '0' || d > '7' {
							break
						}
						l.pos++
						v = v*8 + int(d-'0')
					}
					c = byte(v)
				}
			}
		}
		if len(out) >= maxStringBytes {
			return token{kind: tokEnd}, errStringTooLong
		}
		out = append(out, c)
	}
	l.text = out
	return token{kind: tokString, text: out}, l.failure()
}

// hex reads a <hex string> after its '<'; a last odd digit stands for
// its high half (7.3.4.3).
func (l *lexer) hex() (token, error) {
	out := l.text[:0]
	half, odd := byte(0), false
	for {
		c, ok := l.readByte()
		if !ok || c == '>' {
			break
		}
		v, ok := hexValue(c)
		if !ok {
			continue // white space, or junk a reader may skip
		}
		if !odd {
			half, odd = v<<4, true
			continue
		}
		if len(out) >= maxStringBytes {
			return token{kind: tokEnd}, errStringTooLong
		}
		out = append(out, half|v)
		odd = false
	}
	if odd {
		out = append(out, half)
	}
	l.text = out
	return token{kind: tokString, text: out}, l.failure()
}

func hexValue(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// name reads a /Name after its '/', #xx escapes decoded.
func (l *lexer) name() token {
	out := l.text[:0]
	for {
		c, ok := l.peekByte()
		if !ok || isWhite(c) || isDelimiter(c) {
			break
		}
		l.pos++
		if c == '#' {
			hi, _ := l.peekByte()
			if h, ok := hexValue(hi); ok {
				l.pos++
				lo, _ := l.peekByte()
				if v, ok := hexValue(lo); ok {
					l.pos++
					c = h<<4 | v
				}
			}
		}
		if len(out) < maxNameBytes {
			out = append(out, c)
		}
	}
	l.text = out
	return token{kind: tokName, text: out}
}

// regular reads a run of regular characters that starts with c: a number
// or a keyword. A run longer than any operator is cut, and is then no
// operator koe knows.
func (l *lexer) regular(c byte) token {
	out := append(l.text[:0], c)
	for {
		c, ok := l.peekByte()
		if !ok || isWhite(c) || isDelimiter(c) {
			break
		}
		l.pos++
		if len(out) < 64 {
			out = append(out, c)
		}
	}
	l.text = out
	if v, ok := parseNumber(out); ok {
		return token{kind: tokNumber, num: v}
	}
	return token{kind: tokKeyword, text: out}
}

// parseNumber reads an integer or a real as PDF writes them (7.3.3): a
// sign, digits, at most one point, no exponent.
func parseNumber(b []byte) (float64, bool) {
	i, neg := 0, false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	v, scale, digits, point := 0.0, 1.0, 0, false
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case c >= '0' && c <= '9':
			digits++
			if point {
				scale /= 10
				v += float64(c-'0') * scale
			} else {
				v = v*10 + float64(c-'0')
			}
		case c == '.' && !point:
			point = true
		default:
			return 0, false
		}
	}
	if digits == 0 {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// skipInlineImage passes over an inline image's data after its ID
// operator: binary bytes up to an EI keyword (8.9.7), which would
// otherwise be read as tokens.
func (l *lexer) skipInlineImage() {
	// One white-space byte follows ID; then the data.
	l.readByte()
	prevWhite, sawE := true, false
	for {
		c, ok := l.readByte()
		if !ok {
			return
		}
		switch {
		case sawE && c == 'I':
			if d, ok := l.peekByte(); !ok || isWhite(d) || isDelimiter(d) {
				return
			}
			sawE = false
		case prevWhite && c == 'E':
			sawE = true
		default:
			sawE = false
		}
		prevWhite = isWhite(c)
	}
}
