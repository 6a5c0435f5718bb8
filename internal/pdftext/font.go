package pdftext

import (
	"strings"
	"unicode"
	"unicode/utf16"

	"github.com/ledongthuc/pdf"
)

// font is what reading text needs of a font, read once per document: how
// its codes split, the text and the width of each. The library's own
// font reads its widths from the file again for every glyph and its
// character map again for every font selection, which a page can repeat
// without end.
type font struct {
	// composite: codes of one to four bytes (a Type0 font); else one byte.
	composite bool
	// cmap is the ToUnicode map, nil if none.
	cmap *cmap
	// bytes is a simple font's text per code where cmap has none.
	bytes *[256]string
	// utf16: a composite font whose encoding is Unicode itself.
	utf16 bool
	// widths are a simple font's glyph widths from code first on, in
	// thousandths of the font size.
	first  int
	widths []float64
	// cidWidths and defaultWidth are a composite font's (its W and DW).
	cidWidths    map[uint32]float64
	defaultWidth float64
	// missingWidth is a simple font's width for codes its Widths leave
	// out (its descriptor's MissingWidth).
	missingWidth float64
	// space is the width of the font's word space (the glyph whose text
	// is " "), in thousandths of the font size; 0 when the font has none
	// or its width is not known. Gaps between glyphs are weighed against
	// it: a word space in one font is a wide kerning in another.
	space float64
}

const (
	// maxDifferences bounds an encoding's Differences array: 256 codes and
	// as many numbers place every glyph. The library reads the array
	// through for each code it decodes.
	maxDifferences = 1024
	// maxCIDWidths bounds the widths read from a composite font's W.
	maxCIDWidths = 1 << 16
)

// latin1 is the text of a simple font's codes where nothing better is
// known: most fonts without an encoding of their own are Latin.
var latin1 = func() *[256]string {
	var t [256]string
	for i := range t {
		t[i] = printable(string(rune(i)))
	}
	return &t
}()

// printable drops control characters, which fonts map codes to that draw
// nothing readable.
func printable(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

// loadFont reads a font dictionary; cmaps reads its ToUnicode map.
func loadFont(v pdf.Value, cmaps func(pdf.Value) (*cmap, error)) (*font, error) {
	f := &font{composite: v.Key("Subtype").Name() == "Type0"}
	toUnicode := v.Key("ToUnicode")
	if toUnicode.Kind() == pdf.Stream {
		m, err := cmaps(toUnicode)
		if err != nil {
			return nil, err
		}
		f.cmap = m
	}
	enc := v.Key("Encoding")
	if f.composite {
		name := enc.Name()
		f.utf16 = strings.Contains(name, "UCS2") || strings.Contains(name, "UTF16")
		f.readCIDWidths(v.Key("DescendantFonts").Index(0))
		f.space = f.spaceWidth()
		return f, nil
	}
	f.bytes = simpleText(v, enc, f.cmap != nil)
	f.first = int(v.Key("FirstChar").Int64())
	// A Type3 font's widths are in its own glyph space, which its
	// FontMatrix maps to text space; every other simple font's are in
	// thousandths.
	unit := 1.0
	if v.Key("Subtype").Name() == "Type3" {
		if m := v.Key("FontMatrix"); m.Len() == 6 && m.Index(0).Float64() > 0 {
			unit = m.Index(0).Float64() * 1000
		}
	}
	w := v.Key("Widths")
	f.widths = make([]float64, min(w.Len(), 256))
	for i := range f.widths {
		f.widths[i] = w.Index(i).Float64() * unit
	}
	f.missingWidth = v.Key("FontDescriptor").Key("MissingWidth").Float64() * unit
	if w.Len() == 0 && isCourier(v.Key("BaseFont").Name()) {
		// A standard font without widths: Courier's are all 600, and a
		// reader has them without the file saying so.
		f.missingWidth = 600
	}
	f.space = f.spaceWidth()
	return f, nil
}

// isCourier is one of the four standard Courier fonts, subset or not.
func isCourier(base string) bool {
	if i := strings.IndexByte(base, '+'); i == 6 {
		base = base[i+1:]
	}
	return base == "Courier" || strings.HasPrefix(base, "Courier-") || base == "CourierNew" || strings.HasPrefix(base, "CourierNew,")
}

// spaceWidth finds the font's word space: code 32 where it stands for a
// space, else the lowest code that does (a subset font numbers its
// glyphs as they were first used).
func (f *font) spaceWidth() float64 {
	if !f.composite && f.text(' ', 1) == " " {
		return f.width(' ')
	}
	found, best := false, cmapCode{}
	if f.cmap != nil {
		for c, t := range f.cmap.text {
			if t == " " && (!found || c.n < best.n || c.n == best.n && c.code < best.code) {
				found, best = true, c
			}
		}
	}
	if found {
		return f.width(best.code)
	}
	if !f.composite {
		for c := range uint32(256) {
			if f.bytes[c] == " " {
				return f.width(c)
			}
		}
	}
	return 0
}

// simpleText is a simple font's text per code, as the library's encoder
// decodes each code on its own. The library's encoder is asked only where
// it does not read the ToUnicode map (it would, without bounds, for a
// font with no encoding or Identity-H), and where a Differences array is
// of a real font's size.
func simpleText(v, enc pdf.Value, hasCMap bool) *[256]string {
	switch {
	case hasCMap && (enc.IsNull() || enc.Name() == "Identity-H"):
		return latin1
	case enc.Kind() == pdf.Dict && enc.Key("Differences").Len() > maxDifferences:
		return latin1
	}
	decoder := (&pdf.Font{V: v}).Encoder()
	var t [256]string
	for i := range t {
		t[i] = printable(decoder.Decode(string([]byte{byte(i)})))
	}
	return &t
}

// readCIDWidths reads a CIDFont's default width and its W array: runs of
// "c [w1 w2 …]" and "first last w" (9.7.4.3).
func (f *font) readCIDWidths(desc pdf.Value) {
	f.defaultWidth = 1000
	if dw := desc.Key("DW"); dw.Kind() == pdf.Integer || dw.Kind() == pdf.Real {
		f.defaultWidth = dw.Float64()
	}
	w := desc.Key("W")
	f.cidWidths = map[uint32]float64{}
	// read counts the widths read, the same code's again included: a
	// run of codes read before costs as much as a new one.
	read := 0
	set := func(c uint32, width float64) bool {
		if read++; read > maxCIDWidths {
			return false
		}
		f.cidWidths[c] = width
		return true
	}
	for i := 0; i+1 < w.Len() && read < maxCIDWidths; {
		start := w.Index(i)
		if next := w.Index(i + 1); next.Kind() == pdf.Array {
			c := uint32(start.Int64())
			for j := 0; j < next.Len() && set(c+uint32(j), next.Index(j).Float64()); j++ {
			}
			i += 2
			continue
		}
		if i+2 >= w.Len() {
			break
		}
		first, last, width := start.Int64(), w.Index(i+1).Int64(), w.Index(i+2).Float64()
		for c := max(first, 0); c <= last && set(uint32(c), width); c++ {
		}
		i += 3
	}
}

// code cuts the next code off s: its value and its length in bytes.
func (f *font) code(s string) (uint32, int) {
	if !f.composite {
		return uint32(s[0]), 1
	}
	if f.cmap != nil {
		if c, ok := f.cmap.split(s); ok {
			return c.code, int(c.n)
		}
	}
	if len(s) < 2 {
		return uint32(s[0]), 1
	}
	return uint32(s[0])<<8 | uint32(s[1]), 2
}

// text is what code (n bytes long) stands for; "" when nothing is known.
func (f *font) text(code uint32, n int) string {
	if f.cmap != nil {
		if t, ok := f.cmap.text[cmapCode{code: code, n: uint8(n)}]; ok {
			return printable(t)
		}
	}
	switch {
	case !f.composite:
		return f.bytes[code&0xff]
	case f.utf16 && n == 2:
		return printable(string(utf16.Decode([]uint16{uint16(code)})))
	}
	return ""
}

// width is code's advance in thousandths of the font size.
func (f *font) width(code uint32) float64 {
	if f.composite {
		if w, ok := f.cidWidths[code]; ok {
			return w
		}
		return f.defaultWidth
	}
	if i := int(code) - f.first; i >= 0 && i < len(f.widths) {
		return f.widths[i]
	}
	return f.missingWidth
}

// noFont stands for text shown before any font is selected: one byte a
// code, Latin-1, no widths.
var noFont = &font{bytes: latin1}
