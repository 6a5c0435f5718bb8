package client

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads every event's data until the end or an error.
func readAll(r io.Reader, maxBytes int) ([]string, error) {
	s := newSSEReader(r, maxBytes)
	var got []string
	for {
		data, err := s.next()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, string(data))
	}
}

func TestSSEParsing(t *testing.T) {
	cases := []struct {
		name   string
		stream string
		want   []string
	}{
		{"one event", "data: {\"a\":1}\n\n", []string{`{"a":1}`}},
		{"two events", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"multi-line data joined with LF", "data: a\ndata: b\ndata:\ndata: c\n\n", []string{"a\nb\n\nc"}},
		{"only one leading space is dropped", "data:  two\ndata:none\n\n", []string{" two\nnone"}},
		{"a field with no colon is a field with an empty value", "data\n\n", []string{""}},
		{"comments are heartbeats", ": ping\n\n:\ndata: x\n: in between\n\n", []string{"x"}},
		{"event, id, retry and unknown fields are tolerated", "event: message\nid: 7\nretry: 3000\nfoo: bar\ndata: x\n\n", []string{"x"}},
		{"an event without data dispatches nothing", "event: ping\nid: 3\n\ndata: x\n\n", []string{"x"}},
		{"CRLF line ends", "data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n", []string{"a\nb", "c"}},
		{"lone CR line ends", "data: a\rdata: b\r\rdata: c\r\r", []string{"a\nb", "c"}},
		{"mixed line ends", "data: a\r\n\ndata: b\r\rdata: c\n\r\n", []string{"a", "b", "c"}},
		{"CR CR is two line ends, not CRLF", "data: a\r\r\ndata: b\n\n", []string{"a", "b"}},
		{"a final event without its blank line", "data: a\n\ndata: b\n", []string{"a", "b"}},
		{"a final unterminated line", "data: a\n\ndata: b", []string{"a", "b"}},
		{"trailing comment and blank lines", "data: a\n\n: bye\n\n\n", []string{"a"}},
		{"a byte order mark opens the stream", "\xEF\xBB\xBFdata: a\n\n", []string{"a"}},
		{"only the first byte order mark is dropped", "\xEF\xBB\xBFdata: \xEF\xBB\xBFa\n\n", []string{"\xEF\xBB\xBFa"}},
		{"data with colons keeps them", "data: {\"k\":\"v: w\"}\n\n", []string{`{"k":"v: w"}`}},
		{"field names are case-sensitive", "Data: no\ndata: yes\n\n", []string{"yes"}},
		{"empty stream", "", nil},
		{"UTF-8 passes through", "data: 日本語 ✓\n\n", []string{"日本語 ✓"}},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"bytewise": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"halves":   func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
	}
	for _, tc := range cases {
		for rname, mk := range readers {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				got, err := readAll(mk(tc.stream), 1<<10)
				if err != nil {
					t.Fatalf("error %v", err)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("events %q, want %q", got, tc.want)
				}
			})
		}
	}
}

// A lone CR ends its line at once: the event it completes is returned
// without waiting for the server's next byte.
func TestSSELoneCRDoesNotWaitForMore(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() { _, _ = pw.Write([]byte("data: a\r\r")) }() // then silence
	s := newSSEReader(pr, 1<<10)
	data, err := s.next()
	if err != nil || string(data) != "a" {
		t.Fatalf("next = %q, %v; want a", data, err)
	}
	go func() { _, _ = pw.Write([]byte("\ndata: b\n\n")); _ = pw.Close() }()
	data, err = s.next()
	if err != nil || string(data) != "b" {
		t.Fatalf("after an LF that follows the CR: next = %q, %v; want b", data, err)
	}
}

func TestSSELimits(t *testing.T) {
	const limit = 16
	cases := []struct {
		name   string
		stream string
		want   []string
		fails  bool
	}{
		{"a line at the limit", "data: " + strings.Repeat("x", limit-6) + "\n\n", []string{strings.Repeat("x", limit-6)}, false},
		{"a line over the limit", "data: " + strings.Repeat("x", limit-5) + "\n\n", nil, true},
		{"a comment over the limit", ": " + strings.Repeat("x", limit) + "\ndata: a\n\n", nil, true},
		{"an unterminated line over the limit", "data: a\n\ndata: " + strings.Repeat("x", limit), []string{"a"}, true},
		{"data lines adding up to the limit", "data: 1234567\ndata: 12345678\n\n", []string{"1234567\n12345678"}, false},
		{"data lines adding up to over it", "data: 12345678\ndata: 12345678\n\n", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(iotest.HalfReader(strings.NewReader(tc.stream)), limit)
			if !slices.Equal(got, tc.want) {
				t.Errorf("events %q, want %q", got, tc.want)
			}
			if !tc.fails {
				if err != nil {
					t.Errorf("error %v", err)
				}
				return
			}
			if !errors.Is(err, errLimit) || !strings.Contains(err.Error(), "WithMaxEventBytes") || !strings.Contains(err.Error(), "16 bytes") {
				t.Errorf("error %v, want the limit's, naming WithMaxEventBytes and 16 bytes", err)
			}
		})
	}
}

// A read error other than the end is reported, not taken for the end.
func TestSSEReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))
	got, err := readAll(r, 1<<10)
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
	if !slices.Equal(got, []string{"a"}) {
		t.Errorf("events %q, want [a]", got)
	}
}
