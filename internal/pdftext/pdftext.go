// Package pdftext extracts the text of a PDF page by page, bounded: a
// broken or hostile file is an error, never a hang, a runaway allocation
// or a crash of the server.
package pdftext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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

// Bounds that keep a hostile file from holding a call or its memory. Real
// page trees are a few levels deep, real pages hold kilobytes of drawing
// instructions (the reader keeps about a hundred bytes per glyph), and a
// file of a few megabytes holds far fewer pages.
const (
	maxPageTreeDepth = 32
	maxPageTreeNodes = 100000
	maxPageContent   = 4 << 20
	maxReasonChars   = 100
)

// Extract reads data as a PDF. Its errors are ErrEncrypted, ErrNoText, an
// *UnreadableError, or ctx's error once ctx is done (checked between
// pages).
func Extract(ctx context.Context, data []byte) (doc Document, err error) {
	// The library panics on some malformed files; that costs this call
	// only.
	defer func() {
		if r := recover(); r != nil {
			doc, err = Document{}, unreadable(fmt.Sprint(r))
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(compatibleHeader(data)), int64(len(data)))
	if err != nil {
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
	found := false
	for i, page := range pages {
		// A page is the unit of work the library offers; a call that
		// runs out of time stops between two.
		if err := ctx.Err(); err != nil {
			return Document{}, err
		}
		if err := checkContentSize(page, i+1); err != nil {
			return Document{}, err
		}
		doc.Pages[i] = pageText(page)
		found = found || doc.Pages[i] != ""
	}
	if !found {
		return Document{}, ErrNoText
	}
	return doc, nil
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
func pageList(ctx context.Context, root pdf.Value) ([]pdf.Page, error) {
	var pages []pdf.Page
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
			pages = append(pages, pdf.Page{V: node})
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

// checkContentSize refuses a page whose drawing instructions inflate
// past maxPageContent, before the library holds their glyphs in memory: a
// few kilobytes of deflated stream can stand for gigabytes.
func checkContentSize(page pdf.Page, num int) error {
	contents := page.V.Key("Contents")
	streams := []pdf.Value{contents}
	if contents.Kind() == pdf.Array {
		streams = streams[:0]
		for i := range contents.Len() {
			streams = append(streams, contents.Index(i))
		}
	}
	var total int64
	for _, s := range streams {
		if s.Kind() != pdf.Stream {
			continue
		}
		rc := s.Reader()
		n, err := io.Copy(io.Discard, io.LimitReader(rc, maxPageContent-total+1))
		rc.Close()
		total += n
		if total > maxPageContent {
			return unreadable(fmt.Sprintf("page %d draws more than %d MiB of instructions", num, maxPageContent>>20))
		}
		if err != nil {
			return unreadable(fmt.Sprintf("page %d: %v", num, err))
		}
	}
	return nil
}

// pageText joins a page's glyphs into lines and words: a glyph well below
// the previous one starts a line, one well right of where the previous
// one ended starts a word. "Well right" is a fifth of the font size:
// kerning and tracking between letters stay under it, the narrowest
// justified word space (a quarter of it in most fonts, squeezed) over.
func pageText(page pdf.Page) string {
	if page.V.IsNull() {
		return ""
	}
	glyphs := page.Content().Text
	const wordGap = 0.2
	var b strings.Builder
	var prev *pdf.Text
	for _, t := range glyphs {
		// The library marks the end of a TJ array with a newline glyph
		// of its own; lines are told by position here.
		if t.S == "" || t.S == "\n" {
			continue
		}
		if prev != nil {
			size := max(math.Abs(prev.FontSize), math.Abs(t.FontSize), 1)
			gap := t.X - (prev.X + prev.W)
			switch {
			case math.Abs(t.Y-prev.Y) > size/2:
				b.WriteString("\n")
			case (gap > size*wordGap || gap < -size) && !strings.HasSuffix(b.String(), " ") && t.S != " ":
				b.WriteString(" ")
			}
		}
		b.WriteString(t.S)
		prev = &t
	}
	return ligatures.Replace(strings.TrimSpace(b.String()))
}

// ligatures spells out the typographic ligatures fonts draw as one glyph,
// so that "ﬁrst" is found when someone searches for "first".
var ligatures = strings.NewReplacer("\uFB00", "ff", "\uFB01", "fi", "\uFB02", "fl", "\uFB03", "ffi", "\uFB04", "ffl", "\uFB05", "st", "\uFB06", "st")
