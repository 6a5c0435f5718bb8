package server

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// framing is what a request's raw header block says about how its body is
// framed, read as it arrived: fasthttp's parsed view may differ from what
// the client (or a proxy in front of koe) meant, and handlers may change it.
type framing struct {
	lengths []string // Content-Length values, split at commas
	codings []string // Transfer-Encoding codings, lower case
	// badLine is a header line no parser may read two ways: folded, white
	// space in a name, a bare LF line end, a control character.
	badLine string
}

// readFraming reads a raw header block (without the request line).
func readFraming(raw []byte) framing {
	var f framing
	for len(raw) > 0 {
		var line []byte
		var found bool
		line, raw, found = bytes.Cut(raw, []byte("\n"))
		if found && !bytes.HasSuffix(line, []byte("\r")) && f.badLine == "" {
			f.badLine = "a line ending in a bare LF (HTTP wants CR LF)"
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			continue
		}
		if f.badLine == "" {
			f.badLine = lineProblem(line)
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue // fasthttp refuses these itself
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			for _, v := range strings.Split(string(value), ",") {
				f.lengths = append(f.lengths, strings.TrimSpace(v))
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			for _, v := range strings.Split(string(value), ",") {
				f.codings = append(f.codings, strings.ToLower(strings.TrimSpace(v)))
			}
		}
	}
	return f
}

// lineProblem reports a header line that parsers may read differently.
func lineProblem(line []byte) string {
	if line[0] == ' ' || line[0] == '\t' {
		return "a header line folded onto the next line"
	}
	for _, c := range line {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return fmt.Sprintf("the control character %#02x in a header", c)
		}
	}
	if name, _, ok := bytes.Cut(line, []byte(":")); ok && bytes.ContainsAny(name, " \t") {
		return fmt.Sprintf("white space in the header name %q", name)
	}
	return ""
}

// problem reports why the request's body length is ambiguous, or "".
// Behind a proxy, a request two parsers would cut differently hides a second
// request in the first one's body (request smuggling); RFC 9112 sections
// 6.1-6.3 and 5.1 say to refuse such a request and close the connection.
func (f framing) problem(http11 bool) string {
	if f.badLine != "" {
		return f.badLine
	}
	for _, l := range f.lengths {
		if l != f.lengths[0] {
			return fmt.Sprintf("differing Content-Length values %q", f.lengths)
		}
	}
	if len(f.codings) == 0 {
		return ""
	}
	switch {
	case !http11:
		return "Transfer-Encoding in an HTTP/1.0 request"
	case len(f.lengths) > 0:
		return "both Content-Length and Transfer-Encoding"
	case len(f.codings) != 1 || f.codings[0] != "chunked":
		return fmt.Sprintf("Transfer-Encoding %q (koe accepts only a single chunked)", strings.Join(f.codings, ", "))
	}
	return ""
}

// declaredLength is the body length the client declared, or -1 (none, or
// chunked).
func (f framing) declaredLength() int64 {
	if len(f.lengths) == 0 {
		return -1
	}
	n, err := strconv.ParseInt(f.lengths[0], 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// requestLine finds a request line that ends in a bare LF, which fasthttp
// takes as it takes CR LF. A request's first bytes are known to be the ones
// read right after the connection opened or went idle, before fasthttp
// calls it active; a request already buffered behind the previous one
// (pipelined) starts elsewhere in a read, and is not checked.
type requestLine struct {
	pending  bool // the next read starts a request
	scanning bool // reading the request line
	prevCR   bool // the last byte scanned was CR
	length   int  // bytes of the line so far, CR excluded
	scanned  int
	// bareLF: the request line, or a blank line before it, ended in a
	// bare LF.
	bareLF bool
}

// maxRequestLine bounds the scan; fasthttp refuses longer heads itself.
const maxRequestLine = 8 << 10

func (l *requestLine) next() { *l = requestLine{pending: true} }

// started: fasthttp has the request's first byte; if no read started it,
// it was buffered already.
func (l *requestLine) started() { l.pending = false }

// errBareLF fails the read of a request whose request line ends in a bare
// LF.
var errBareLF = errors.New("a request line ending in a bare LF (HTTP wants CR LF)")

// scan reads b, the next bytes from the client, and reports whether they
// end a request line in a bare LF.
func (l *requestLine) scan(b []byte) bool {
	if l.pending {
		l.pending, l.scanning = false, true
	}
	if !l.scanning {
		return false
	}
	for _, c := range b {
		l.scanned++
		switch {
		case c == '\n':
			if !l.prevCR {
				l.bareLF, l.scanning = true, false
				return true
			}
			if l.length > 0 {
				l.scanning = false // a whole line, ended well
				return false
			}
			// a blank line before the request: fasthttp skips it
		case c == '\r':
		default:
			l.length++
		}
		l.prevCR = c == '\r'
		if l.scanned >= maxRequestLine {
			l.scanning = false
			return false
		}
	}
	return false
}
