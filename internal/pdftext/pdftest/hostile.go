package pdftest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
)

// The hostile files below are small on disk and large once inflated: a
// deflated run of one repeated unit shrinks about a thousandfold.

// InflatingPages is a PDF of pages pages whose content streams each
// inflate to about size bytes of text-showing instructions. With shared,
// every page draws one and the same stream object, so that the file stays
// small however many pages read it.
func InflatingPages(pages, size int, shared bool) []byte {
	var f File
	catalog := f.Add("")
	tree := f.Add("")
	// Widths apart, as producers write them: a reader that looks them up
	// for each glyph parses the array each time.
	widths := f.Add("[" + strings.TrimSpace(strings.Repeat("556 ", 126-32+1)) + "]")
	font := f.Add(fmt.Sprintf("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding /FirstChar 32 /LastChar 126 /Widths %d 0 R >>", widths))
	stream := func() int {
		return f.Add(FlateStream(deflateRepeated("BT /F1 12 Tf 72 720 Td ", "(aaaaaaaaaaaaaaaa) Tj ", "ET", size), ""))
	}
	contents := 0
	if shared {
		contents = stream()
	}
	kids := make([]string, pages)
	for i := range kids {
		c := contents
		if !shared {
			c = stream()
		}
		page := f.Add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>", tree, font, c))
		kids[i] = fmt.Sprintf("%d 0 R", page)
	}
	f.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", tree))
	f.Set(tree, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), pages))
	return f.Bytes(catalog, 0)
}

// CMapText is the text a page of InflatingCMap shows: the CMap maps the
// font's two-byte codes 0x0041… to the letters A…, as real CMaps of
// subset fonts do.
const CMapText = "CMAP"

// InflatingCMap is a one-page PDF whose only font (a composite font, as
// producers embed for most scripts) has a ToUnicode character map that
// inflates to about size bytes: a few real mappings, then the same
// mapping over and over. The page selects the font selects times before
// it shows CMapText, as pages that switch fonts between words do.
func InflatingCMap(size, selects int) []byte {
	var f File
	catalog := f.Add("")
	tree := f.Add("")
	var real strings.Builder
	fmt.Fprintf(&real, "/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n1 begincodespacerange <0000> <FFFF> endcodespacerange\n%d beginbfchar\n", len(CMapText))
	for _, r := range CMapText {
		fmt.Fprintf(&real, "<%04X> <%04X>\n", r, r)
	}
	real.WriteString("endbfchar\n")
	filler := "100 beginbfchar\n" + strings.Repeat("<0020> <0020>\n", 100) + "endbfchar\n"
	cmap := f.Add(FlateStream(deflateRepeated(real.String(), filler, "endcmap CMapName currentdict /CMap defineresource pop end end\n", size), ""))
	descendant := f.Add("<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Hostile /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /DW 500 >>")
	font := f.Add(fmt.Sprintf("<< /Type /Font /Subtype /Type0 /BaseFont /Hostile /Encoding /Identity-H /DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>", descendant, cmap))
	var codes strings.Builder
	for _, r := range CMapText {
		fmt.Fprintf(&codes, "%04X", r)
	}
	content := fmt.Sprintf("BT %s72 720 Td <%s> Tj ET", strings.Repeat("/F1 12 Tf ", max(selects, 1)), codes.String())
	contents := f.Add(FlateStream(Deflate([]byte(content)), ""))
	page := f.Add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>", tree, font, contents))
	f.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", tree))
	f.Set(tree, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", page))
	return f.Bytes(catalog, 0)
}

// deflateRepeated deflates head, then unit as many times as brings the
// whole to about size bytes, then tail, without holding the inflated
// bytes: size may be hundreds of megabytes.
func deflateRepeated(head, unit, tail string, size int) []byte {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write([]byte(head))
	block := []byte(strings.Repeat(unit, max(1, (64<<10)/len(unit))))
	for left := size - len(head) - len(tail); left > 0; left -= len(block) {
		n := min(len(block), left)
		n -= n % len(unit)
		if n == 0 {
			break
		}
		zw.Write(block[:n])
	}
	zw.Write([]byte(tail))
	zw.Close()
	return z.Bytes()
}
