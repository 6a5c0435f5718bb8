package pdftest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// Files whose structure holds numbers a reader should not trust: where a
// cross-reference section says objects are, and how many objects an
// object stream holds. Tests and the hostile probe change one number.

// ClassicXref is a PDF 1.4 file whose cross-reference table has one more
// subsection, extra.
func ClassicXref(extra string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	o1 := b.Len()
	b.WriteString("1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n")
	o2 := b.Len()
	b.WriteString("2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\n")
	x := b.Len()
	fmt.Fprintf(&b, "xref\n0 3\n0000000000 65535 f \n%010d 00000 n \n%010d 00000 n \n%strailer << /Size 3 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", o1, o2, extra, x)
	return b.Bytes()
}

// StreamXref is a PDF 1.5 file whose cross-reference stream has the
// given dictionary entries and data.
func StreamXref(entries string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.5\n")
	b.WriteString("1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n")
	b.WriteString("2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\n")
	x := b.Len()
	z := Deflate(data)
	fmt.Fprintf(&b, "3 0 obj << /Type /XRef %s /Root 1 0 R /Length %d /Filter /FlateDecode >> stream\n%s\nendstream endobj\n", entries, len(z), z)
	fmt.Fprintf(&b, "startxref\n%d\n%%%%EOF\n", x)
	return b.Bytes()
}

// ObjectStream is a PDF 1.5 file whose catalog is object 1 in an object
// stream whose dictionary has the given entries. The stream's own list
// names object listed: another than 1, and looking object 1 up reads the
// list through.
func ObjectStream(entries string, listed int) []byte {
	return objectStream(entries, listed, false)
}

// ObjectStreamInItself is ObjectStream(entries, 1) but that the
// cross-reference stream says the object stream is in itself.
func ObjectStreamInItself() []byte {
	return objectStream("/N 1", 1, true)
}

func objectStream(entries string, listed int, inItself bool) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.5\n")
	o2 := b.Len()
	b.WriteString("2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\n")
	content := fmt.Sprintf("%d 0 << /Type /Catalog /Pages 2 0 R >>", listed)
	o4 := b.Len()
	fmt.Fprintf(&b, "4 0 obj << /Type /ObjStm %s /First %d /Length %d >> stream\n%s\nendstream endobj\n", entries, strings.IndexByte(content, '<'), len(content), content)
	// Entries of 1 + 4 + 2 bytes: type, offset or stream, generation or
	// index.
	var xref bytes.Buffer
	entry := func(typ byte, a uint32, c uint16) {
		xref.WriteByte(typ)
		_ = binary.Write(&xref, binary.BigEndian, a)
		_ = binary.Write(&xref, binary.BigEndian, c)
	}
	entry(0, 0, 65535)
	entry(2, 4, 0)
	entry(1, uint32(o2), 0)
	entry(0, 0, 0)
	if inItself {
		entry(2, 4, 0)
	} else {
		entry(1, uint32(o4), 0)
	}
	x := b.Len()
	entry(1, uint32(x), 0)
	z := Deflate(xref.Bytes())
	fmt.Fprintf(&b, "5 0 obj << /Type /XRef /Size 6 /W [1 4 2] /Root 1 0 R /Length %d /Filter /FlateDecode >> stream\n%s\nendstream endobj\n", len(z), z)
	fmt.Fprintf(&b, "startxref\n%d\n%%%%EOF\n", x)
	return b.Bytes()
}
