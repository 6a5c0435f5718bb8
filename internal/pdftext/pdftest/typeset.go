package pdftest

import (
	"fmt"
	"math"
	"strings"
)

// Placement is how a producer places the glyphs of a line: the ways
// producers found in the wild write text, each of which leaves the word
// spaces for a reader to find from the glyphs' positions.
type Placement int

const (
	// PlaceLine shows each line as one string, its spaces included
	// (justified by Tw, letter-spaced by Tc).
	PlaceLine Placement = iota
	// PlaceKernedTJ shows each line as one TJ array, a kerning number
	// between letters, the spaces as glyphs (LibreOffice's way).
	PlaceKernedTJ
	// PlaceWordsTJ shows each line as one TJ array of kerned words whose
	// gaps are numbers, with no space glyph (TeX's way, and justified
	// text's).
	PlaceWordsTJ
	// PlaceGlyphTd shows each glyph, spaces included, as a string of its
	// own moved to by Td (Chromium's way where glyphs are not where their
	// widths put them: kerning, letter-spacing).
	PlaceGlyphTd
	// PlaceGlyphTm shows each glyph as a string of its own placed by a Tm
	// of its own, the spaces not drawn.
	PlaceGlyphTm
	// PlaceWordTd shows each word as a string moved to by Td, the spaces
	// not drawn.
	PlaceWordTd
)

// Typesetting is how Typeset sets its lines.
type Typesetting struct {
	Placement Placement
	// Composite sets the text in a Type0 font with two-byte codes
	// numbered by first use, as subset fonts are, with a W array and a
	// ToUnicode map; else a simple font with Widths and WinAnsi codes.
	Composite bool
	// Space is the font's space width in thousandths of the font size
	// (0: 278, Helvetica's); Times' is 250, Courier's 600.
	Space float64
	// WordGap is the gap between words in thousandths of the font size
	// (0: the space width): under it squeezes the line as justified text
	// does, over it stretches it.
	WordGap float64
	// Tracking is the spacing added after every glyph (letter-spacing),
	// in thousandths of the font size: Tc where the placement has one
	// string to set it for, else in the positions.
	Tracking float64
	// Size is the font size (0: 11); Scale the horizontal scaling in
	// percent (0: 100).
	Size, Scale float64
	// Flipped writes the page upside down and each text matrix flipped
	// back, as Chromium does; Rotate turns the text by degrees.
	Flipped bool
	Rotate  float64
	// Unmapped is a letter whose glyph has no text in a Composite font's
	// map (as a ligature's glyph may not): it is drawn, and reads as
	// nothing.
	Unmapped rune
}

// Width is a test font's width of r in thousandths of the font size,
// proportional as a book face's are; space is the width of ' '.
func Width(r rune, space float64) float64 {
	switch {
	case r == ' ':
		return space
	case strings.ContainsRune("ijl.,;:'!|", r):
		return 260
	case strings.ContainsRune("frtI()-", r):
		return 340
	case strings.ContainsRune("mwMW", r):
		return 860
	case r >= 'A' && r <= 'Z':
		return 690
	}
	return 540
}

// Kern is the test font's kerning between a and b in thousandths of the
// font size: the classic pairs pulled together, every other pair nudged
// by up to 0.02 em either way, as fonts' hinted advances are.
func Kern(a, b rune) float64 {
	switch string([]rune{a, b}) {
	case "AV", "VA", "AW", "WA", "To", "Ta", "Te", "Ty", "Ya", "Ye", "Yo", "LT", "Wa", "We", "Wo", "Ky":
		return -110
	}
	return float64((int(a)*31+int(b)*17)%41 - 20)
}

// Typeset is a one-page PDF setting lines of words in one test font.
func Typeset(ts Typesetting, lines ...string) []byte {
	if ts.Space == 0 {
		ts.Space = 278
	}
	if ts.WordGap == 0 {
		ts.WordGap = ts.Space
	}
	if ts.Size == 0 {
		ts.Size = 11
	}
	if ts.Scale == 0 {
		ts.Scale = 100
	}
	fnt := newTestFont(ts)
	var c strings.Builder
	if ts.Flipped {
		c.WriteString("1 0 0 -1 0 792 cm\n")
	}
	for i, line := range lines {
		// The line's origin, in page space the right way up: a line
		// below the last one across the baseline, however it turns.
		sin, cos := math.Sincos(ts.Rotate * math.Pi / 180)
		down := float64(i) * ts.Size * 1.5
		x, y := 72+down*sin, 720-down*cos
		if ts.Flipped {
			y = 792 - y
		}
		fmt.Fprintf(&c, "BT /F1 %g Tf %g Tz\n", ts.Size, ts.Scale)
		ts.setLine(&c, fnt, line, x, y)
		c.WriteString("ET\n")
	}
	var f File
	catalog := f.Add("")
	tree := f.Add("")
	font := fnt.objects(&f)
	contents := f.Add(FlateStream(Deflate([]byte(c.String())), ""))
	page := f.Add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>", tree, font, contents))
	f.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", tree))
	f.Set(tree, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", page))
	return f.Bytes(catalog, 0)
}

// matrix is the text matrix of a glyph at (x, y) along the line: rotated,
// and flipped back where the page is.
func (ts Typesetting) matrix(x, y float64) string {
	sin, cos := math.Sincos(ts.Rotate * math.Pi / 180)
	d := 1.0
	if ts.Flipped {
		d = -1
	}
	return fmt.Sprintf("%.5f %.5f %.5f %.5f %.4f %.4f Tm", cos, sin*d, -sin, cos*d, x, y)
}

// setLine writes one line's text showing.
func (ts Typesetting) setLine(c *strings.Builder, fnt *testFont, line string, x, y float64) {
	words := strings.Fields(line)
	fmt.Fprintf(c, "%s\n", ts.matrix(x, y))
	// em is a thousandth of the font size, in text space along the line.
	em := ts.Size * ts.Scale / 100 / 1000
	switch ts.Placement {
	case PlaceLine:
		fmt.Fprintf(c, "%g Tc %g Tw %s Tj\n", ts.Tracking*ts.Size/1000, (ts.WordGap-ts.Space)*ts.Size/1000, fnt.show(strings.Join(words, " ")))
	case PlaceKernedTJ, PlaceWordsTJ:
		fmt.Fprintf(c, "%g Tc [", ts.Tracking*ts.Size/1000)
		for i, word := range words {
			if i > 0 && ts.Placement == PlaceKernedTJ {
				fmt.Fprintf(c, "%s %g ", fnt.show(" "), -(ts.WordGap - ts.Space))
			} else if i > 0 {
				fmt.Fprintf(c, "%g ", -ts.WordGap)
			}
			var prev rune
			for j, r := range word {
				if j > 0 {
					fmt.Fprintf(c, "%g ", -Kern(prev, r))
				}
				fmt.Fprintf(c, "%s ", fnt.show(string(r)))
				prev = r
			}
		}
		c.WriteString("] TJ\n")
	default:
		// Where each glyph or word goes, in text space from the line's
		// start: widths, kerning, tracking and word gaps summed.
		pen, last := 0.0, 0.0
		for i, word := range words {
			if i > 0 {
				if ts.Placement == PlaceGlyphTd {
					pen += ts.Tracking * em
					pen = ts.place(c, fnt, " ", pen, &last, x, y)
					pen += (ts.WordGap - ts.Space + ts.Tracking) * em
				} else {
					pen += (ts.WordGap + ts.Tracking) * em
				}
			}
			if ts.Placement == PlaceWordTd {
				pen = ts.place(c, fnt, word, pen, &last, x, y)
				continue
			}
			var prev rune
			for j, r := range word {
				if j > 0 {
					pen += (Kern(prev, r) + ts.Tracking) * em
				}
				pen = ts.place(c, fnt, string(r), pen, &last, x, y)
				prev = r
			}
		}
	}
}

// place shows s at pen (text space along the line, last where the
// previous Td went) and is where its widths end.
func (ts Typesetting) place(c *strings.Builder, fnt *testFont, s string, pen float64, last *float64, x, y float64) float64 {
	if ts.Placement == PlaceGlyphTm {
		sin, cos := math.Sincos(ts.Rotate * math.Pi / 180)
		if ts.Flipped {
			sin = -sin
		}
		fmt.Fprintf(c, "%s %s Tj\n", ts.matrix(x+pen*cos, y+pen*sin), fnt.show(s))
	} else {
		// Td moves by the text matrix's own units, as pen counts.
		fmt.Fprintf(c, "%.4f 0 Td %s Tj\n", pen-*last, fnt.show(s))
		*last = pen
	}
	for _, r := range s {
		pen += Width(r, ts.Space) * ts.Size * ts.Scale / 100 / 1000
	}
	return pen
}

// testFont is the font of a Typeset page and the codes it has used.
type testFont struct {
	ts    Typesetting
	codes map[rune]int // composite: a code per letter, by first use
	order []rune
}

func newTestFont(ts Typesetting) *testFont {
	return &testFont{ts: ts, codes: map[rune]int{}}
}

// show is s as a string operand in the font's codes.
func (f *testFont) show(s string) string {
	if !f.ts.Composite {
		return "(" + String(s) + ")"
	}
	var b strings.Builder
	b.WriteByte('<')
	for _, r := range s {
		code, ok := f.codes[r]
		if !ok {
			code = len(f.order) + 3 // subset fonts keep the first few
			f.codes[r] = code
			f.order = append(f.order, r)
		}
		fmt.Fprintf(&b, "%04X", code)
	}
	b.WriteByte('>')
	return b.String()
}

// objects adds the font's objects to f and is the font's number.
func (f *testFont) objects(file *File) int {
	if !f.ts.Composite {
		widths := make([]string, 0, 256-32)
		for c := 32; c < 256; c++ {
			widths = append(widths, fmt.Sprint(Width(rune(c), f.ts.Space)))
		}
		return file.Add(fmt.Sprintf("<< /Type /Font /Subtype /TrueType /BaseFont /KoeTestSerif /FirstChar 32 /LastChar 255 /Widths [%s] /Encoding /WinAnsiEncoding >>", strings.Join(widths, " ")))
	}
	var w, cmap strings.Builder
	w.WriteString("[")
	fmt.Fprintf(&cmap, "/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n1 begincodespacerange <0000> <FFFF> endcodespacerange\n%d beginbfchar\n", len(f.order))
	for _, r := range f.order {
		fmt.Fprintf(&w, " %d [%g]", f.codes[r], Width(r, f.ts.Space))
		if r == f.ts.Unmapped {
			fmt.Fprintf(&cmap, "<%04X> <>\n", f.codes[r])
			continue
		}
		fmt.Fprintf(&cmap, "<%04X> <%04X>\n", f.codes[r], r)
	}
	w.WriteString(" ]")
	cmap.WriteString("endbfchar\nendcmap CMapName currentdict /CMap defineresource pop end end\n")
	toUnicode := file.Add(FlateStream(Deflate([]byte(cmap.String())), ""))
	descendant := file.Add(fmt.Sprintf("<< /Type /Font /Subtype /CIDFontType2 /BaseFont /KoeTestSerif /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /CIDToGIDMap /Identity /DW 0 /W %s >>", w.String()))
	return file.Add(fmt.Sprintf("<< /Type /Font /Subtype /Type0 /BaseFont /KoeTestSerif /Encoding /Identity-H /DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>", descendant, toUnicode))
}

// PageWith is a one-page PDF whose page draws content with the
// resources given (the body of its Resources dictionary), among which
// objects are numbers 3, 4, ... in order.
func PageWith(content, resources string, objects ...string) []byte {
	var f File
	catalog := f.Add("")
	tree := f.Add("")
	for _, body := range objects {
		f.Add(body)
	}
	contents := f.Add(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	page := f.Add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << %s >> /Contents %d 0 R >>", tree, resources, contents))
	f.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", tree))
	f.Set(tree, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", page))
	return f.Bytes(catalog, 0)
}
