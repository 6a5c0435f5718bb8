package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What is logged of lines a stdio server writes to stdout that are not
// messages. Servers print banners and debug lines there by mistake; the
// SDK would end the connection at the first one, and the server would be
// restarted at every call that prints. The reference SDKs skip such lines
// and say so; koe does too.
const (
	msgStdoutSkipped     = "MCP server wrote a line to stdout that is not a JSON-RPC message; skipped"
	msgStdoutSkippedMore = "MCP server wrote more lines to stdout that are not JSON-RPC messages; skipped"
	stdoutHint           = "a stdio server's stdout carries only the protocol: its logs belong on stderr"
)

// skipLogEvery is how often skipped lines are logged at most, after the
// first: a server that prints on every call would otherwise fill the log.
const skipLogEvery = time.Minute

// previewChars bounds what of a skipped line the log quotes.
const previewChars = 200

// stdoutReadSize is how much of stdout is read at a time: a long line of
// text is skipped in pieces of this size, never held whole.
const stdoutReadSize = 32 << 10

// stdoutFilter is a stdio server's stdout as the SDK reads it: the lines
// that are JSON-RPC messages (or batches of them), one per line, and
// nothing else. A message longer than max bytes ends the stream with an
// error naming mcp_max_line_bytes; a longer line of anything else is
// skipped as it streams by. Only the SDK's one reading goroutine calls
// Read; Close may come from another.
type stdoutFilter struct {
	src  io.ReadCloser
	in   *bufio.Reader
	max  int
	skip skipLog

	// line is the message being passed on, newline included, and sent
	// how much of it Read has returned; err ends the stream once line is
	// sent.
	line []byte
	sent int
	err  error
}

func newStdoutFilter(src io.ReadCloser, max int, log *slog.Logger) *stdoutFilter {
	return &stdoutFilter{
		src:  src,
		in:   bufio.NewReaderSize(src, stdoutReadSize),
		max:  max,
		skip: skipLog{log: log, every: skipLogEvery, now: time.Now},
	}
}

func (f *stdoutFilter) Close() error { return f.src.Close() }

func (f *stdoutFilter) Read(p []byte) (int, error) {
	for f.sent == len(f.line) {
		if f.err != nil {
			return 0, f.err
		}
		f.line, f.sent = f.line[:0], 0
		text, err := f.readLine()
		// A last line without a newline still counts.
		f.err = err
		switch {
		case text != nil:
			f.skip.skipped(preview(text))
		case len(bytes.TrimSpace(f.line)) == 0:
			f.line = f.line[:0]
		case !isMessage(bytes.TrimSpace(f.line)):
			f.skip.skipped(preview(f.line))
			f.line = f.line[:0]
		default:
			// Passed on trimmed: the SDK wants nothing but a line end
			// after a message.
			n := copy(f.line, bytes.TrimSpace(f.line))
			f.line = append(f.line[:n], '\n')
		}
	}
	n := copy(p, f.line[f.sent:])
	f.sent += n
	return n, nil
}

// readLine reads the next line. One that may be a message (its first
// byte that is not white space is '{' or '[') goes into f.line, up to
// f.max bytes; any other is skipped as it is read, and what it started
// with is returned as text. err is the read's (io.EOF after a last line
// without a newline), or a message over the limit.
func (f *stdoutFilter) readLine() (text []byte, err error) {
	const (
		undecided = iota // only white space so far
		message
		other
	)
	kind := undecided
	for {
		chunk, err := f.in.ReadSlice('\n')
		if kind == undecided {
			if i := bytes.IndexFunc(chunk, func(r rune) bool { return !unicode.IsSpace(r) }); i >= 0 {
				kind = other
				if chunk[i] == '{' || chunk[i] == '[' {
					kind = message
				}
			}
		}
		switch {
		case kind == other:
			text = appendPreview(text, chunk)
		case len(f.line)+len(chunk) <= f.max:
			f.line = append(f.line, chunk...)
		case kind == message:
			f.line = f.line[:0]
			return nil, fmt.Errorf("the server sent a message of more than %d bytes (mcp_max_line_bytes)", f.max)
		default:
			// White space past the limit is not a message either.
			kind = other
			text = appendPreview(appendPreview(text, f.line), chunk)
			f.line = f.line[:0]
		}
		if err != bufio.ErrBufferFull {
			if text == nil && kind == other {
				text = []byte{}
			}
			return text, err
		}
	}
}

// appendPreview adds to text what of chunk the log may quote.
func appendPreview(text, chunk []byte) []byte {
	room := previewChars*utf8MaxBytes - len(text)
	if room <= 0 {
		return text
	}
	if text == nil {
		text = make([]byte, 0, min(len(chunk), room))
	}
	return append(text, chunk[:min(len(chunk), room)]...)
}

// utf8MaxBytes is the longest a character is in UTF-8: previewChars
// characters take at most this many bytes each.
const utf8MaxBytes = 4

// preview is a skipped line as the log quotes it.
func preview(line []byte) string {
	s := strings.ToValidUTF8(string(line), "")
	s = strings.TrimRight(s, "\r\n")
	return clip(s, previewChars)
}

// isMessage reports whether line is what the SDK reads: one JSON-RPC
// message, or a non-empty array of them.
func isMessage(line []byte) bool {
	if line[0] == '{' {
		_, err := jsonrpc.DecodeMessage(line)
		return err == nil
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(line, &batch); err != nil || len(batch) == 0 {
		return false
	}
	for _, m := range batch {
		if _, err := jsonrpc.DecodeMessage(m); err != nil {
			return false
		}
	}
	return true
}

// skipLog logs skipped lines: the first at once, then at most one note
// per interval with how many more there were.
type skipLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time
	// last is when a note was last logged; more counts the lines
	// skipped since.
	last time.Time
	more int
}

func (s *skipLog) skipped(line string) {
	now := s.now()
	switch {
	case s.last.IsZero():
		s.log.Warn(msgStdoutSkipped, "line", line, "hint", stdoutHint)
	case now.Sub(s.last) < s.every:
		s.more++
		return
	default:
		s.log.Warn(msgStdoutSkippedMore, "lines", s.more+1, "latest", line, "since", now.Sub(s.last).Round(time.Second))
	}
	s.last, s.more = now, 0
}
