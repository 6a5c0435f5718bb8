// Package pdftest writes small PDF files for tests: by the book, with the
// objects' real offsets, so that a reader that fails on them has a bug.
package pdftest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
)

// Page is one page of a test PDF: its content stream, and whether the
// stream is stored deflated as most producers store it.
type Page struct {
	Content  string
	Compress bool
}

// Build writes a PDF 1.4 file: a catalog, a page tree, two standard fonts
// (F1: Helvetica without widths, F2: Courier with its 600-unit widths,
// both WinAnsi), the pages, an Info dictionary with title when title is
// not "", and a cross-reference table.
func Build(title string, pages ...Page) []byte {
	var objects []string
	add := func(body string) int {
		objects = append(objects, body)
		return len(objects)
	}
	catalog := add("") // filled in once the page tree's number is known
	tree := add("")
	helvetica := add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	widths := strings.TrimSpace(strings.Repeat("600 ", 126-32+1))
	courier := add(fmt.Sprintf("<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding /FirstChar 32 /LastChar 126 /Widths [%s] >>", widths))
	var kids []string
	for _, p := range pages {
		stream := []byte(p.Content)
		filter := ""
		if p.Compress {
			var z bytes.Buffer
			zw := zlib.NewWriter(&z)
			zw.Write(stream)
			zw.Close()
			stream, filter = z.Bytes(), " /Filter /FlateDecode"
		}
		contents := add(fmt.Sprintf("<< /Length %d%s >>\nstream\n%s\nendstream", len(stream), filter, stream))
		page := add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R /F2 %d 0 R >> >> /Contents %d 0 R >>",
			tree, helvetica, courier, contents))
		kids = append(kids, fmt.Sprintf("%d 0 R", page))
	}
	objects[catalog-1] = fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", tree)
	objects[tree-1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(kids))
	info := ""
	if title != "" {
		info = fmt.Sprintf(" /Info %d 0 R", add(fmt.Sprintf("<< /Title (%s) >>", String(title))))
	}

	var out bytes.Buffer
	out.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objects))
	for i, body := range objects {
		offsets[i] = out.Len()
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", i+1, body)
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d /Root %d 0 R%s >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, catalog, info, xref)
	return out.Bytes()
}

// Minimal is a one-page PDF showing text in Helvetica.
func Minimal(compress bool, text string) []byte {
	return Build("", Page{Content: fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", String(text)), Compress: compress})
}

// String escapes s for a PDF literal string, in WinAnsi (Latin-1 here;
// other characters become "?").
func String(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '(' || r == ')' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 128:
			b.WriteRune(r)
		case r < 256:
			fmt.Fprintf(&b, "\\%03o", r) // Latin-1 is WinAnsi here
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}
