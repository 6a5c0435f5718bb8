// Package pdftext extracts the text of a PDF page by page, bounded: a
// broken or hostile file is an error, never a hang, a runaway allocation
// or a crash of the server.
package pdftext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ledongthuc/pdf"
)

// Document is a PDF's text.
type Document struct {
	// Pages holds each page's text, in page order; a page without text
	// is "".
	Pages []string
	// Title is the Info dictionary's Title ("" when it has none).
	Title string
}

// ErrEncrypted is a PDF that cannot be read without a password, or whose
// encryption the reader does not know.
var ErrEncrypted = errors.New("an encrypted PDF")

// ErrNoText is a PDF whose pages hold no text: most often scans, whose
// pages are images.
var ErrNoText = errors.New("a PDF without text to extract (scanned pages are images)")

// UnreadableError is a file that does not parse as a PDF.
type UnreadableError struct {
	// Reason is why, one line of at most maxReasonChars characters.
	Reason string
}

func (e *UnreadableError) Error() string { return "could not be read as a PDF: " + e.Reason }

// Bounds that keep a hostile file from holding a call. Real page trees
// are a few levels deep, and a file of a few megabytes holds far fewer
// pages.
const (
	maxPageTreeDepth = 32
	maxPageTreeNodes = 100000
	maxReasonChars   = 100
)

// Extract reads data as a PDF within the default Limits; see
// ExtractWithin.
func Extract(ctx context.Context, data []byte) (Document, error) {
	return ExtractWithin(ctx, data, Limits{})
}

// ExtractWithin reads data as a PDF. Its errors are ErrEncrypted,
// ErrNoText, an *UnreadableError, a *LimitError, or ctx's error once ctx
// is done, which ends the call wherever it is: within a page, within the
// library's reading of the file.
func ExtractWithin(ctx context.Context, data []byte, lim Limits) (doc Document, err error) {
	// The library panics on some malformed files; that costs this call
	// only. A stopped is ctx ending inside the library.
	defer func() {
		if r := recover(); r != nil {
			if s, ok := r.(stopped); ok {
				doc, err = Document{}, s.err
				return
			}
			doc, err = Document{}, unreadable(fmt.Sprint(r))
		}
	}()
	if err := ctx.Err(); err != nil {
		return Document{}, err
	}
	data = compatibleHeader(data)
	if err := checkStructure(data); err != nil {
		return Document{}, err
	}
	r, err := pdf.NewReader(&file{ctx: ctx, data: data}, int64(len(data)))
	var stop stopped
	switch {
	case errors.As(err, &stop):
		return Document{}, stop.err
	case err != nil:
		if errors.Is(err, pdf.ErrInvalidPassword) || strings.Contains(err.Error(), "encryption") {
			return Document{}, ErrEncrypted
		}
		return Document{}, unreadable(err.Error())
	}
	pages, err := pageList(ctx, r.Trailer().Key("Root").Key("Pages"))
	if err != nil {
		return Document{}, err
	}
	doc.Title = strings.Join(strings.Fields(r.Trailer().Key("Info").Key("Title").Text()), " ")
	doc.Pages = make([]string, len(pages))
	rd := newReading(ctx, lim)
	found := false
	for i, page := range pages {
		if err := ctx.Err(); err != nil {
			return Document{}, err
		}
		text, err := rd.page(page)
		if err != nil {
			return Document{}, pageError(ctx, err, i+1)
		}
		doc.Pages[i] = text
		found = found || text != ""
	}
	if !found {
		return Document{}, ErrNoText
	}
	return doc, nil
}

// pageError words what ended the reading of page num.
func pageError(ctx context.Context, err error, num int) error {
	var limit *LimitError
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &limit):
		return limit
	}
	return unreadable(fmt.Sprintf("page %d: %v", num, err))
}

func unreadable(reason string) *UnreadableError {
	reason = strings.Join(strings.Fields(reason), " ")
	if r := []rune(reason); len(r) > maxReasonChars {
		reason = string(r[:maxReasonChars-1]) + "…"
	}
	return &UnreadableError{Reason: reason}
}

// compatibleHeader lets a PDF 2.0 file through the library's header check,
// which knows versions up to 1.7 only; the bytes after the header are
// read the same. The swap keeps the length, so offsets still hold.
func compatibleHeader(data []byte) []byte {
	if !bytes.HasPrefix(data, []byte("%PDF-2.")) {
		return data
	}
	fixed := bytes.Clone(data)
	copy(fixed, "%PDF-1.7")
	return fixed
}

// pageList walks the page tree in order. The library's own lookup follows
// Kids without bounds, so a tree that contains itself (a broken or a
// hostile file) would spin forever where no ctx can stop it.
func pageList(ctx context.Context, root pdf.Value) ([]pdf.Value, error) {
	var pages []pdf.Value
	visited := 0
	var walk func(node pdf.Value, depth int) error
	walk = func(node pdf.Value, depth int) error {
		if visited++; visited > maxPageTreeNodes {
			return unreadable("its page tree is too large")
		}
		if depth > maxPageTreeDepth {
			return unreadable("its page tree is too deep or loops")
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		switch node.Key("Type").Name() {
		case "Page":
			pages = append(pages, node)
		case "Pages":
			kids := node.Key("Kids")
			for i := range kids.Len() {
				if err := walk(kids.Index(i), depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, 0); err != nil {
		return nil, err
	}
	return pages, nil
}
