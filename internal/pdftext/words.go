package pdftext

import (
	"math"
	"slices"
	"strings"
)

// Where one word ends and the next begins is not written in a PDF: a
// producer may show a line as one string with its spaces, as one glyph
// or one word at a time each placed on its own (Chromium, LibreOffice),
// or as strings whose word gaps are TJ offsets and no space at all (TeX,
// justified text). So spaces are decided from where the glyphs stand:
// the gap between where one glyph's pen move ends and where the next
// glyph starts, along the baseline, in font sizes (em).

// glyph is one shown glyph in page space.
type glyph struct {
	// x, y is where the glyph starts; dx, dy is the pen's move past it
	// (its width and the character spacing, not the word spacing).
	x, y, dx, dy float64
	// ux, uy is the unit vector along the baseline.
	ux, uy float64
	// em is the font size, space the font's word space (0: unknown), both
	// in page units.
	em, space float64
	text      string
}

const (
	// wordGap is the gap that separates words where a font's space is not
	// known, and the most the space's share below may ask for: kerning
	// and tracking between letters stay under a fifth of the font size,
	// the narrowest justified word space (a quarter of it in most fonts,
	// squeezed) over.
	wordGap = 0.2
	// spaceShare of the font's own space is a word gap: half a space is
	// wider than any kerning, and narrower than the most squeezed
	// justified space (TeX shrinks a Times space of 0.25 em to 0.19).
	spaceShare = 0.5
	// minWordGap is the least gap that may separate words, however
	// narrow a font's space is: a positive kerning reaches a tenth.
	minWordGap = 0.1
	// lineShift is how far across the baseline, in em, a glyph starts a
	// new line: a superscript or subscript is raised or lowered less.
	lineShift = 0.5
	// backJump is how far back along the baseline, in em, a glyph is
	// another word placed out of order (a column, a table cell), not an
	// overlap of letters.
	backJump = 1.0
	// maxTracking bounds the tracking a line is taken to have (em).
	maxTracking = 1.0
	// minTrackingSamples is the fewest letter gaps a line's tracking is
	// read from.
	minTrackingSamples = 4
	// maxLineGlyphs bounds the glyphs held while a line is read; a longer
	// line is decided in parts of this many.
	maxLineGlyphs = 1024
)

// lineGlyph is a glyph with text, held until its line is decided.
type lineGlyph struct {
	text string
	// gap is the widest gap (em) before the glyph since the last glyph
	// with text, -Inf at the start of a line; thr the gap over which it
	// is a word space.
	gap, thr float64
	// jumped: the glyph was placed back along the line, out of order.
	jumped bool
}

// pageWriter joins a page's glyphs into lines and words: a glyph
// lineShift across the baseline from the previous one starts a line; a
// gap wider than the word gap starts a word. A line is held until it
// ends, because letter-spaced text (CSS letter-spacing, which Chromium
// writes as one placed glyph after another, and which is in no text
// state a reader sees) has letter gaps as wide as word gaps: the line's
// own letter gaps tell how much tracking to discount. Every byte written
// is charged to the meter.
type pageWriter struct {
	b      strings.Builder
	m      *meter
	spaced bool // b ends with a space

	// last is the last glyph placed, text or not: a glyph without text
	// (one its font maps to nothing) still stands between its
	// neighbours.
	last    glyph
	hasLast bool
	// gap, thr and jumped are what stands before the next glyph with
	// text; broken that a line ended before it.
	gap, thr       float64
	jumped, broken bool

	line []lineGlyph
	// spaces: the line holds a space glyph of its own; wide: a gap on it
	// reaches the word gap.
	spaces, wide bool
	samples      []float64
}

func (w *pageWriter) glyph(t glyph) error {
	if w.hasLast {
		p := &w.last
		em := max(p.em, t.em)
		rx, ry := t.x-p.x, t.y-p.y
		switch across := math.Abs(ry*p.ux - rx*p.uy); {
		case !(across <= em*lineShift): // NaN too: no line to share
			if err := w.endLine(); err != nil {
				return err
			}
			w.broken, w.gap, w.jumped = true, math.Inf(-1), false
		default:
			gap := ((rx-p.dx)*p.ux + (ry-p.dy)*p.uy) / em
			switch {
			case gap < -backJump:
				w.jumped = true
			case gap > w.gap:
				w.gap, w.thr = gap, wordGapFor(p.space/em)
			}
		}
	} else {
		w.gap = math.Inf(-1)
	}
	w.last, w.hasLast = t, true
	if t.text == "" {
		return nil
	}
	if w.broken {
		w.broken = false
		if w.b.Len() > 0 {
			if err := w.write("\n"); err != nil {
				return err
			}
		}
	}
	if len(w.line) == maxLineGlyphs {
		if err := w.endLine(); err != nil {
			return err
		}
	}
	w.spaces = w.spaces || isSpace(t.text)
	w.wide = w.wide || w.gap > w.thr
	w.line = append(w.line, lineGlyph{text: t.text, gap: w.gap, thr: w.thr, jumped: w.jumped})
	w.gap, w.jumped = math.Inf(-1), false
	return nil
}

// wordGapFor is the word gap (em) in a font whose space is space em
// wide (0: not known).
func wordGapFor(space float64) float64 {
	if !(space > 0) {
		return wordGap
	}
	return min(max(space*spaceShare, minWordGap), wordGap)
}

// endLine writes the held glyphs, a space before each that starts a
// word.
func (w *pageWriter) endLine() error {
	tracking := 0.0
	// Only a line that writes its own spaces and has a wide gap can be
	// letter-spaced in a way that matters: without spaces of its own its
	// wide gaps are its word spaces (a word per placed string), and
	// without a wide gap every gap is a letter's.
	if w.spaces && w.wide {
		tracking = w.tracking()
	}
	for _, g := range w.line {
		if (g.jumped || g.gap > g.thr+tracking) && !w.spaced && w.b.Len() > 0 && !isSpace(g.text) {
			if err := w.write(" "); err != nil {
				return err
			}
		}
		if err := w.write(g.text); err != nil {
			return err
		}
	}
	w.line, w.spaces, w.wide = w.line[:0], false, false
	return nil
}

// tracking is the spacing the held line puts between letters (em): the
// lower quartile of the gaps between two glyphs that are not spaces, so
// that the gaps after a quarter of the letters (the last of each word in
// a line placed word by word) do not count, nor kerning pairs much.
func (w *pageWriter) tracking() float64 {
	w.samples = w.samples[:0]
	for i := 1; i < len(w.line); i++ {
		g := w.line[i]
		if !g.jumped && !math.IsInf(g.gap, 0) && !math.IsNaN(g.gap) && !isSpace(g.text) && !isSpace(w.line[i-1].text) {
			w.samples = append(w.samples, g.gap)
		}
	}
	if len(w.samples) < minTrackingSamples {
		return 0
	}
	slices.Sort(w.samples)
	return min(max(w.samples[len(w.samples)/4], 0), maxTracking)
}

// end writes what is held: the page's content has ended.
func (w *pageWriter) end() error { return w.endLine() }

// isSpace is a glyph whose text is all white space.
func isSpace(s string) bool {
	return s != "" && strings.TrimSpace(s) == ""
}

func (w *pageWriter) write(s string) error {
	if err := w.m.charge(len(s)); err != nil {
		return err
	}
	w.b.WriteString(s)
	w.spaced = strings.HasSuffix(s, " ")
	return nil
}

// text is the page's text, trimmed, ligatures spelled out.
func (w *pageWriter) text() string {
	s := strings.TrimSpace(w.b.String())
	// The replacer copies what it is given even when it replaces
	// nothing, and a page's text may be megabytes.
	if strings.IndexFunc(s, func(r rune) bool { return r >= '\uFB00' && r <= '\uFB06' }) < 0 {
		return s
	}
	return ligatures.Replace(s)
}

// ligatures spells out the typographic ligatures fonts draw as one glyph,
// so that "ﬁrst" is found when someone searches for "first".
var ligatures = strings.NewReplacer("\uFB00", "ff", "\uFB01", "fi", "\uFB02", "fl", "\uFB03", "ffi", "\uFB04", "ffl", "\uFB05", "st", "\uFB06", "st")
