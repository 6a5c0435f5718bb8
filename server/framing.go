package server

import (
	"bytes"
	"fmt"
	"strings"
)

// framingProblem reports why a request's body length is ambiguous, or "".
// Behind a proxy, a request two parsers would cut differently hides a second
// request in the first one's body (request smuggling); RFC 9112 sections
// 6.1-6.3 and 5.1 say to refuse such a request and close the connection.
// fasthttp refuses some of these itself (a repeated Content-Length, a coding
// it does not know) but lets Content-Length with Transfer-Encoding, several
// Transfer-Encoding fields, identity and HTTP/1.0 with Transfer-Encoding
// through, and has already read such a body its own way: so the check looks
// at the raw header block.
func framingProblem(raw []byte, http11 bool) string {
	var lengths []string
	var codings []string
	for len(raw) > 0 {
		var line []byte
		line, raw, _ = bytes.Cut(raw, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			return "a header line folded onto the next line"
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue // fasthttp refuses these itself
		}
		if bytes.ContainsAny(name, " \t") {
			return fmt.Sprintf("white space in the header name %q", name)
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			for _, v := range strings.Split(string(value), ",") {
				lengths = append(lengths, strings.TrimSpace(v))
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			for _, v := range strings.Split(string(value), ",") {
				codings = append(codings, strings.ToLower(strings.TrimSpace(v)))
			}
		}
	}
	for _, l := range lengths {
		if l != lengths[0] {
			return fmt.Sprintf("differing Content-Length values %q", lengths)
		}
	}
	if len(codings) == 0 {
		return ""
	}
	switch {
	case !http11:
		return "Transfer-Encoding in an HTTP/1.0 request"
	case len(lengths) > 0:
		return "both Content-Length and Transfer-Encoding"
	case len(codings) != 1 || codings[0] != "chunked":
		return fmt.Sprintf("Transfer-Encoding %q (koe accepts only a single chunked)", strings.Join(codings, ", "))
	}
	return ""
}
