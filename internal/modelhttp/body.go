package modelhttp

import (
	"bytes"
	"io"
)

// cutBody hands out the first bytes of an error body and then CutMark, if
// there was more.
type cutBody struct {
	body    io.ReadCloser
	left    int64  // bytes that may still be handed out
	mark    []byte // what is left of CutMark to hand out
	checked bool   // whether the byte after the limit was looked for
}

func (b *cutBody) Read(p []byte) (int, error) {
	if len(b.mark) > 0 {
		n := copy(p, b.mark)
		b.mark = b.mark[n:]
		if len(b.mark) == 0 {
			return n, io.EOF
		}
		return n, nil
	}
	if b.left > 0 {
		if int64(len(p)) > b.left {
			p = p[:b.left]
		}
		n, err := b.body.Read(p)
		b.left -= int64(n)
		if b.left == 0 && err == nil {
			return n, nil
		}
		return n, err
	}
	if b.checked {
		return 0, io.EOF
	}
	b.checked = true
	// One byte more tells a body of exactly the limit from a longer one.
	var one [1]byte
	if n, _ := io.ReadFull(b.body, one[:]); n == 0 {
		return 0, io.EOF
	}
	b.mark = []byte(CutMark)
	return b.Read(p)
}

func (b *cutBody) Close() error { return b.body.Close() }

// wholeBody fails once more than its limit has been read.
type wholeBody struct {
	body  io.ReadCloser
	limit Limit
	read  int64
	err   error // once failed, for good
}

func (b *wholeBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	// Never more than one byte past the limit off the network.
	if left := b.limit.Bytes - b.read + 1; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.body.Read(p)
	b.read += int64(n)
	if over := b.read - b.limit.Bytes; over > 0 {
		b.err = &TooLargeError{What: "its answer", Limit: b.limit}
		return n - int(over), b.err
	}
	return n, err
}

func (b *wholeBody) Close() error { return b.body.Close() }

// dataPrefix starts the lines of an event stream that carry events; other
// lines are comments, other fields, or not an event stream at all.
const dataPrefix = "data:"

// lineBody fails once a line of an event stream, or the lines that are
// not "data:" lines together, run past the limit. It hands on what it read
// up to then (at most one read more than the limit: the reader's buffer),
// so what the caller holds stays bounded.
type lineBody struct {
	body  io.ReadCloser
	limit Limit
	err   error  // once failed, for good
	over  string // what ran past the limit, once something did

	line   int64 // bytes of the current line so far
	stray  int64 // bytes of the lines that are not data lines, from their first non-blank byte
	kind   lineKind
	prefix int // bytes of dataPrefix matched at the line's start
}

type lineKind int

const (
	lineStart lineKind = iota // blanks at the start of a line, or part of dataPrefix
	lineData
	lineStray
)

func (b *lineBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	if what := b.scan(p[:n]); what != "" {
		b.err = &TooLargeError{What: what, Limit: b.limit}
		return n, b.err
	}
	return n, err
}

// scan follows the lines in p and names what ran past the limit, if
// anything did.
func (b *lineBody) scan(p []byte) string {
	for len(p) > 0 {
		if b.kind == lineStart {
			p = b.scanStart(p)
		} else {
			p = b.scanRest(p)
		}
		if b.over != "" {
			return b.over
		}
	}
	return ""
}

// check notes what of the stream, if anything, is past the limit now.
func (b *lineBody) check() {
	switch {
	case b.line > b.limit.Bytes:
		b.over = "one line of its event stream"
	case b.stray > b.limit.Bytes:
		b.over = "the lines of its event stream that are not data lines, together,"
	}
}

// scanStart reads a line's first bytes until it knows whether the line is
// a data line, and returns the rest of p.
func (b *lineBody) scanStart(p []byte) []byte {
	for i, c := range p {
		switch {
		case c == '\n':
			// A blank line ends an event; a line that is only the start
			// of dataPrefix is kept by go-openai as stray text.
			b.stray += int64(b.prefix)
			b.check()
			b.newLine()
			return p[i+1:]
		case b.prefix == 0 && (c == ' ' || c == '\t' || c == '\r'):
			b.line++
		case c == dataPrefix[b.prefix]:
			b.line++
			b.prefix++
			if b.prefix == len(dataPrefix) {
				b.kind = lineData
				return p[i+1:]
			}
		default:
			// Not a data line: what matched of the prefix was its start.
			b.kind = lineStray
			b.stray += int64(b.prefix)
			return p[i:]
		}
	}
	b.check()
	return nil
}

// scanRest counts the rest of a line, up to and with its newline, and
// returns what follows.
func (b *lineBody) scanRest(p []byte) []byte {
	end := bytes.IndexByte(p, '\n')
	if end < 0 {
		end = len(p)
	}
	b.line += int64(end)
	if b.kind == lineStray {
		b.stray += int64(end)
	}
	b.check()
	if end == len(p) {
		return nil
	}
	b.newLine()
	return p[end+1:]
}

func (b *lineBody) newLine() { b.line, b.kind, b.prefix = 0, lineStart, 0 }

func (b *lineBody) Close() error { return b.body.Close() }
