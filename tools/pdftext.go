package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ledongthuc/pdf"
)

// pdfText extracts a PDF's text page by page, from where its glyphs are
// drawn: a PDF has no spaces or line breaks of its own, only positions.
// The library panics on some malformed files; that costs this call only.
func pdfText(ctx context.Context, p string, data []byte) (text string, err error) {
	defer func() {
		if r := recover(); r != nil {
			text, err = "", fmt.Errorf("%q could not be read as a PDF: %v", clip(p), clipTo(oneLine(fmt.Sprint(r)), 100))
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if errors.Is(err, pdf.ErrInvalidPassword) {
		return "", fmt.Errorf("%q is an encrypted PDF, which read_file cannot open", clip(p))
	}
	if err != nil {
		return "", fmt.Errorf("%q could not be read as a PDF: %v", clip(p), clipTo(oneLine(err.Error()), 100))
	}
	pages, err := pageList(ctx, r.Trailer().Key("Root").Key("Pages"))
	if ctx.Err() != nil {
		return "", ctxError(ctx.Err())
	}
	if err != nil {
		return "", fmt.Errorf("%q could not be read as a PDF: %w", clip(p), err)
	}
	var b strings.Builder
	found := false
	for i, page := range pages {
		// A page is the unit of work the library offers; a call that
		// runs out of time stops between two.
		if err := ctx.Err(); err != nil {
			return "", ctxError(err)
		}
		text := pageText(page)
		found = found || text != ""
		if len(pages) > 1 {
			if i > 0 {
				b.WriteString("\n\n")
			}
			fmt.Fprintf(&b, "[page %d]\n", i+1)
		}
		b.WriteString(text)
	}
	if !found {
		return "", fmt.Errorf("%q is a PDF without text to extract (scanned pages are images)", clip(p))
	}
	return b.String(), nil
}

// Bounds of a page tree: real ones are a few levels deep, and a file of
// tools.files.max_bytes holds far fewer pages.
const (
	maxPageTreeDepth = 32
	maxPageTreeNodes = 100000
)

// pageList walks the page tree in order. The library's own lookup follows
// Kids without bounds, so a tree that contains itself (a broken or a
// hostile file) would spin forever where no ctx can stop it.
func pageList(ctx context.Context, root pdf.Value) ([]pdf.Page, error) {
	var pages []pdf.Page
	visited := 0
	var walk func(node pdf.Value, depth int) error
	walk = func(node pdf.Value, depth int) error {
		if visited++; visited > maxPageTreeNodes {
			return errors.New("its page tree is too large")
		}
		if depth > maxPageTreeDepth {
			return errors.New("its page tree is too deep or loops")
		}
		if err := ctx.Err(); err != nil {
			return ctxError(err)
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

// pageText joins a page's glyphs into lines and words: a glyph well below
// the previous one starts a line, one well right of where the previous
// one ended starts a word.
func pageText(page pdf.Page) string {
	if page.V.IsNull() {
		return ""
	}
	var b strings.Builder
	var prev *pdf.Text
	for _, t := range page.Content().Text {
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
			case (gap > size*0.15 || gap < -size) && !strings.HasSuffix(b.String(), " ") && t.S != " ":
				b.WriteString(" ")
			}
		}
		b.WriteString(t.S)
		prev = &t
	}
	return strings.TrimSpace(b.String())
}
