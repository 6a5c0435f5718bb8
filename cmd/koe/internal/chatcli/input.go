package chatcli

import (
	"bufio"
	"io"
	"strings"
)

// lineReader reads the user's lines in a goroutine of its own, so that the
// prompt can wait for a line and for Ctrl-C at once. It reads only when
// asked: what is typed during a turn stays in the terminal's buffer for
// the next prompt.
//
// A read from a terminal cannot be cancelled; the goroutine ends when its
// reader ends or fails, or at the first line after close. koe chat exits
// right after close, and tests close their pipe.
type lineReader struct {
	ask   chan struct{}
	lines chan lineResult
	done  chan struct{}
}

type lineResult struct {
	text string
	err  error // io.EOF: Ctrl-D, or the end of piped input
}

func newLineReader(r io.Reader) *lineReader {
	l := &lineReader{ask: make(chan struct{}, 1), lines: make(chan lineResult, 1), done: make(chan struct{})}
	go l.run(bufio.NewReader(r))
	return l
}

func (l *lineReader) run(br *bufio.Reader) {
	for {
		select {
		case <-l.ask:
		case <-l.done:
			return
		}
		text, err := br.ReadString('\n')
		text = strings.TrimRight(text, "\r\n")
		if err != nil && text != "" {
			// A last line without its newline is still a line; the
			// end comes at the next ask.
			err = nil
		}
		select {
		case l.lines <- lineResult{text, err}:
		case <-l.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// next asks for the next line; it arrives on lines. A caller that asks
// again before it came still gets one line.
func (l *lineReader) next() {
	select {
	case l.ask <- struct{}{}:
	default:
	}
}

func (l *lineReader) close() { close(l.done) }
