package modelhttp

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readers gives src whole and one byte per read, so that every line and
// prefix is also cut between two reads.
func readers(src string) map[string]func() io.ReadCloser {
	return map[string]func() io.ReadCloser{
		"whole":    func() io.ReadCloser { return io.NopCloser(strings.NewReader(src)) },
		"bytewise": func() io.ReadCloser { return io.NopCloser(iotest.OneByteReader(strings.NewReader(src))) },
	}
}

func TestCutBody(t *testing.T) {
	const limit = 16
	for _, tc := range []struct {
		body, want string
	}{
		{"", ""},
		{"short", "short"},
		{strings.Repeat("a", limit), strings.Repeat("a", limit)},
		{strings.Repeat("a", limit+1), strings.Repeat("a", limit) + CutMark},
		{strings.Repeat("b", 100*limit), strings.Repeat("b", limit) + CutMark},
	} {
		for name, r := range readers(tc.body) {
			got, err := io.ReadAll(&cutBody{body: r(), left: limit})
			if err != nil || string(got) != tc.want {
				t.Errorf("%s body of %d bytes: %q, %v; want %q", name, len(tc.body), got, err, tc.want)
			}
			l := Limit{Bytes: limit}
			if cut := l.Cut(got); cut != (len(tc.body) > limit) {
				t.Errorf("%s body of %d bytes: Cut = %v", name, len(tc.body), cut)
			}
		}
	}
}

func TestWholeBody(t *testing.T) {
	const limit = 64
	l := Limit{Bytes: limit, Key: "x.max_response_bytes"}
	for name, r := range readers(strings.Repeat("a", limit)) {
		if got, err := io.ReadAll(&wholeBody{body: r(), limit: l}); err != nil || len(got) != limit {
			t.Errorf("%s: %d bytes, %v; want all %d", name, len(got), err, limit)
		}
	}
	for name, r := range readers(strings.Repeat("a", limit+1)) {
		got, err := io.ReadAll(&wholeBody{body: r(), limit: l})
		var tooLarge *TooLargeError
		if !errors.As(err, &tooLarge) || tooLarge.Limit != l {
			t.Fatalf("%s: %v, want a TooLargeError for %v", name, err, l)
		}
		if len(got) != limit {
			t.Errorf("%s: handed on %d bytes, want %d", name, len(got), limit)
		}
		if msg := err.Error(); msg != "its answer ran past x.max_response_bytes (64 bytes)" {
			t.Errorf("%s: message %q", name, msg)
		}
	}
}

func TestLineBody(t *testing.T) {
	const limit = 32
	long := strings.Repeat("x", limit)
	const (
		fine  = ""
		line  = "one line of its event stream"
		stray = "the lines of its event stream that are not data lines, together,"
	)
	for _, tc := range []struct {
		name, stream, want string
	}{
		{"events", "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n", fine},
		{"a line of the limit", long + "\n", fine},
		{"a data line of the limit", "data:" + long[5:] + "\n" + "data:" + long[5:], fine},
		{"a line past the limit", long + "x\n", line},
		{"a data line past the limit", "data: " + long + "\n", line},
		{"no newline", "data: " + strings.Repeat("x", 10*limit), line},
		{"blank lines", strings.Repeat(" \r\n\n", 10*limit), fine},
		{"blanks without end", strings.Repeat(" ", limit+1), line},
		{"leading blanks before data", strings.Repeat("  data: "+long[10:]+"\n", 20), fine},
		{"comments under the limit", ": ping\n" + strings.Repeat("data: {}\n\n", 50) + ": ping\n", fine},
		{"comments past the limit together", strings.Repeat(": ping\ndata: {}\n\n", limit), stray},
		{"partial prefixes", strings.Repeat("data\n", limit), stray},
		{"near prefixes", strings.Repeat("dat: x\ndata: {}\n", limit), stray},
		{"an HTML page", "<html>\n<body>\n" + strings.Repeat("<p>hello</p>\n", limit) + "</html>\n", stray},
	} {
		for name, r := range readers(tc.stream) {
			l := Limit{Bytes: limit, Key: "x.max_line_bytes"}
			got, err := io.ReadAll(&lineBody{body: r(), limit: l})
			if tc.want == fine {
				if err != nil || string(got) != tc.stream {
					t.Errorf("%s, %s: %d of %d bytes, %v; want all", tc.name, name, len(got), len(tc.stream), err)
				}
				continue
			}
			var tooLarge *TooLargeError
			if !errors.As(err, &tooLarge) || tooLarge.What != tc.want || tooLarge.Limit != l {
				t.Errorf("%s, %s: %v; want %q past %v", tc.name, name, err, tc.want, l)
				continue
			}
			// Handed on: at most the limit's worth of the offending
			// line or lines, plus what the last read brought.
			if len(got) > len(tc.stream) || !strings.HasPrefix(tc.stream, string(got)) {
				t.Errorf("%s, %s: handed on %q, not a start of the stream", tc.name, name, got)
			}
		}
	}
}

func TestLineBodyStopsForGood(t *testing.T) {
	b := &lineBody{body: io.NopCloser(strings.NewReader(strings.Repeat("x", 100))), limit: Limit{Bytes: 10}}
	p := make([]byte, 50)
	if _, err := b.Read(p); err == nil {
		t.Fatal("no error past the limit")
	}
	if n, err := b.Read(p); n != 0 || err == nil {
		t.Errorf("read after the failure: %d bytes, %v; want 0 and the error again", n, err)
	}
}
