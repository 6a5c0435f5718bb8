package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// sseReader splits a Server-Sent Events stream into the data of its
// events, as the WHATWG event-stream format defines it: lines end with
// CRLF, LF or a lone CR; a line starting with ":" is a comment (koe's
// heartbeat); "data" lines of one event are joined with "\n"; a blank
// line dispatches the event; "event", "id" and "retry" are accepted and
// play no part, since koe sends one kind of event and a chat turn cannot
// be resumed by reconnecting.
type sseReader struct {
	r   *bufio.Reader
	max int
	// afterCR: the previous line ended with CR, so an LF that starts the
	// next read belongs to it. It is skipped then rather than waited for,
	// so that a line ended by a lone CR is not held back until the
	// server's next byte.
	afterCR bool
	started bool
	eof     bool
	line    []byte
	data    []byte
}

// errLimit is what a line or event over the limit fails with.
var errLimit = errors.New("client: server-sent event too large")

func newSSEReader(r io.Reader, maxBytes int) *sseReader {
	return &sseReader{r: bufio.NewReader(r), max: maxBytes}
}

// next returns the data of the next event. At the end of the stream it
// returns io.EOF; an event whose blank line never came is still returned
// first, because a server that closed right after its last data line did
// say it (and JSON decoding catches a line that was cut).
func (s *sseReader) next() ([]byte, error) {
	s.data = s.data[:0]
	hasData := false
	for {
		line, err := s.readLine()
		if err == io.EOF {
			if hasData {
				return s.data, nil
			}
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if hasData {
				return s.data, nil
			}
			continue // a blank line with no data dispatches nothing
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		if string(field) != "data" {
			continue // event, id, retry and unknown fields
		}
		if hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		hasData = true
		if len(s.data) > s.max {
			return nil, fmt.Errorf("%w: an event's data is over %d bytes (client.WithMaxEventBytes)", errLimit, s.max)
		}
	}
}

// readLine returns the next line without its end. At the end of the
// stream an unterminated last line is returned before io.EOF.
func (s *sseReader) readLine() ([]byte, error) {
	if s.eof {
		return nil, io.EOF
	}
	s.line = s.line[:0]
	for {
		if _, err := s.r.Peek(1); err != nil {
			if err != io.EOF {
				return nil, fmt.Errorf("client: reading the event stream: %w", err)
			}
			s.eof = true
			if len(s.line) > 0 {
				return s.line, nil
			}
			return nil, io.EOF
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		if s.afterCR {
			s.afterCR = false
			if buf[0] == '\n' {
				_, _ = s.r.Discard(1)
				continue
			}
		}
		if !s.started {
			s.started = true
			// One UTF-8 byte order mark may open the stream. Peek
			// waits for all three bytes, which every stream that is
			// more than a comment has.
			bom := []byte("\xEF\xBB\xBF")
			if head, _ := s.r.Peek(len(bom)); bytes.Equal(head, bom) {
				_, _ = s.r.Discard(len(bom))
			}
			continue
		}
		i := bytes.IndexAny(buf, "\r\n")
		n := i
		if i < 0 {
			n = len(buf)
		}
		if len(s.line)+n > s.max {
			return nil, fmt.Errorf("%w: a line is over %d bytes (client.WithMaxEventBytes)", errLimit, s.max)
		}
		s.line = append(s.line, buf[:n]...)
		if i < 0 {
			_, _ = s.r.Discard(n)
			continue
		}
		s.afterCR = buf[i] == '\r'
		_, _ = s.r.Discard(i + 1)
		return s.line, nil
	}
}
