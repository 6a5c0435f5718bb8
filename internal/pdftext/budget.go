package pdftext

import (
	"context"
	"errors"
	"fmt"
	"io"

	"koe/internal/quote"
)

// Limits bound what reading one PDF may cost.
type Limits struct {
	// MaxInflated is the most bytes the PDF's streams may inflate to as
	// they are read, together with the text made of them (0:
	// DefaultMaxInflated). It is the document's, not a page's: a stream
	// that several pages draw counts each time it is drawn, and each
	// drawing of a form XObject counts 4 KiB more.
	MaxInflated int64
}

// DefaultMaxInflated is Limits.MaxInflated when none is given: more than
// the drawing instructions and text of a book of a thousand pages.
const DefaultMaxInflated = 128 << 20

// LimitError is a PDF that inflates to more than Limits.MaxInflated.
type LimitError struct {
	Limit int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("its streams and text inflate to more than %s", quote.Bytes(e.Limit))
}

// meter counts against the limits what an extraction inflates and makes.
type meter struct {
	ctx   context.Context
	limit int64
	used  int64
}

func newMeter(ctx context.Context, lim Limits) *meter {
	if lim.MaxInflated <= 0 {
		lim.MaxInflated = DefaultMaxInflated
	}
	return &meter{ctx: ctx, limit: lim.MaxInflated}
}

func (m *meter) charge(n int) error {
	if m.used += int64(n); m.used > m.limit {
		return &LimitError{Limit: m.limit}
	}
	return nil
}

// inflated is a stream's decoded bytes, metered as they are read; a read
// also ends the extraction when its context has.
type inflated struct {
	r io.Reader
	m *meter
}

func (s inflated) Read(p []byte) (int, error) {
	if err := s.m.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := s.r.Read(p)
	if cerr := s.m.charge(n); cerr != nil {
		return 0, cerr
	}
	return n, err
}

// file is the PDF's bytes as the library reads them. The library reads
// objects and inflates object streams on its own, in loops no context
// reaches; every read it makes comes here, and once ctx is done the read
// panics with a stopped, which unwinds the library back to Extract.
type file struct {
	ctx  context.Context
	data []byte
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.ctx.Err(); err != nil {
		panic(stopped{err})
	}
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// stopped carries the context's error through the library. It is an
// error because the library turns the panics it recovers into errors.
type stopped struct{ err error }

func (s stopped) Error() string { return s.err.Error() }
func (s stopped) Unwrap() error { return s.err }
