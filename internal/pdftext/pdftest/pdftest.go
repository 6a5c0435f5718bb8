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
	var f File
	catalog := f.Add("") // filled in once the page tree's number is known
	tree := f.Add("")
	helvetica := f.Add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	widths := strings.TrimSpace(strings.Repeat("600 ", 126-32+1))
	courier := f.Add(fmt.Sprintf("<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding /FirstChar 32 /LastChar 126 /Widths [%s] >>", widths))
	var kids []string
	for _, p := range pages {
		var contents int
		if p.Compress {
			contents = f.Add(FlateStream(Deflate([]byte(p.Content)), ""))
		} else {
			contents = f.Add(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(p.Content), p.Content))
		}
		page := f.Add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R /F2 %d 0 R >> >> /Contents %d 0 R >>",
			tree, helvetica, courier, contents))
		kids = append(kids, fmt.Sprintf("%d 0 R", page))
	}
	f.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", tree))
	f.Set(tree, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(kids)))
	info := 0
	if title != "" {
		info = f.Add(fmt.Sprintf("<< /Title (%s) >>", String(title)))
	}
	return f.Bytes(catalog, info)
}

// File is a PDF being written object by object; object n is the n-th
// added (from 1).
type File struct{ objects []string }

// Add appends an object's body (what goes between "obj" and "endobj")
// and returns its number.
func (f *File) Add(body string) int {
	f.objects = append(f.objects, body)
	return len(f.objects)
}

// Set replaces object n's body.
func (f *File) Set(n int, body string) { f.objects[n-1] = body }

// Bytes writes the file: the header, the objects at the offsets the
// cross-reference table gives, the trailer naming root as the catalog
// and info (0: none) as the Info dictionary.
func (f *File) Bytes(root, info int) []byte {
	var out bytes.Buffer
	out.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(f.objects))
	for i, body := range f.objects {
		offsets[i] = out.Len()
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", i+1, body)
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(f.objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", off)
	}
	infoRef := ""
	if info > 0 {
		infoRef = fmt.Sprintf(" /Info %d 0 R", info)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d /Root %d 0 R%s >>\nstartxref\n%d\n%%%%EOF\n", len(f.objects)+1, root, infoRef, xref)
	return out.Bytes()
}

// Deflate compresses data as a FlateDecode stream stores it.
func Deflate(data []byte) []byte {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write(data)
	zw.Close()
	return z.Bytes()
}

// FlateStream is the body of a stream object holding deflated bytes;
// extra goes into its dictionary ("" for none).
func FlateStream(deflated []byte, extra string) string {
	return fmt.Sprintf("<< /Length %d /Filter /FlateDecode%s >>\nstream\n%s\nendstream", len(deflated), extra, deflated)
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
