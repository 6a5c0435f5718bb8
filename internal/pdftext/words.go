package pdftext

import (
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
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
	// x, y is where the glyph starts; dx, dy its width.
	x, y, dx, dy float64
	text         string
}

// glyphRun is what the glyphs of one string shown have in common, in
// page space.
type glyphRun struct {
	// ux, uy is the unit vector along the baseline.
	ux, uy float64
	// em is the font size, space the font's word space (0: unknown).
	em, space float64
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

	// last is the last glyph placed, text or not, and lastRun its run:
	// a glyph without text (one its font maps to nothing) still stands
	// between its neighbours. run is the run of the glyphs to come.
	last         glyph
	lastRun, run glyphRun
	hasLast      bool
	// gap, thr and jumped are what stands before the next glyph with
	// text; broken that a line ended before it.
	gap, thr       float64
	jumped, broken bool

	// line holds the glyphs of the line from its first wide gap on (a
	// gap that reaches the word gap): until the line's tracking is known
	// it is not known whether they start words. The glyphs before it are
	// written as they come: the common line is never held.
	line []lineGlyph
	// samples are the letter gaps (em) of the glyphs held: between two
	// letters or digits, not punctuation (a table of contents' leader
	// dots are spaced alike, and are no letters); spaces: the line holds
	// a space glyph of its own; afterLetter: the last glyph with text was
	// a letter or digit.
	samples             []float64
	spaces, afterLetter bool
}

// startRun sets what the glyphs to come have in common.
func (w *pageWriter) startRun(r glyphRun) { w.run = r }

func (w *pageWriter) glyph(t *glyph) error {
	if w.hasLast {
		p, pr := &w.last, &w.lastRun
		em := pr.em
		if w.run.em > em {
			em = w.run.em
		}
		rx, ry := t.x-p.x, t.y-p.y
		switch across := math.Abs(ry*pr.ux - rx*pr.uy); {
		case !(across <= em*lineShift): // NaN too: no line to share
			if err := w.endLine(); err != nil {
				return err
			}
			w.broken, w.gap, w.jumped = true, math.Inf(-1), false
		default:
			gap := ((rx-p.dx)*pr.ux + (ry-p.dy)*pr.uy) / em
			switch {
			case gap < -backJump:
				w.jumped = true
			case gap > w.gap:
				// A gap no wider than the least word gap is a letter's
				// whatever the font: the common case, and the one that
				// needs no threshold.
				w.gap, w.thr = gap, math.Inf(1)
				if gap > minWordGap {
					w.thr = wordGapFor(pr.space / em)
				}
			}
		}
	} else {
		w.gap = math.Inf(-1)
	}
	w.last, w.lastRun, w.hasLast = *t, w.run, true
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
	space, letter, afterLetter := isSpace(t.text), isLetter(t.text), w.afterLetter
	w.spaces = w.spaces || space
	w.afterLetter = letter
	g := lineGlyph{text: t.text, gap: w.gap, thr: w.thr, jumped: w.jumped}
	w.gap, w.jumped = math.Inf(-1), false
	if len(w.line) == 0 && !(g.gap > g.thr) {
		// No tracking makes a gap under the word gap a word's.
		return w.put(g, 0)
	}
	if len(w.line) == maxLineGlyphs {
		// A line this long is decided in parts.
		if err := w.endLine(); err != nil {
			return err
		}
	}
	w.line = append(w.line, g)
	if letter && afterLetter && !g.jumped && !math.IsInf(g.gap, 0) && !math.IsNaN(g.gap) {
		w.samples = append(w.samples, g.gap)
	}
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
// word, and forgets the line's letter gaps.
func (w *pageWriter) endLine() error {
	tracking := 0.0
	if len(w.line) > 0 {
		tracking = w.tracking()
	}
	// A line with no spaces of its own is letter-spaced only where some
	// gap is wider than its letters' by a word gap: one whose gaps are
	// all alike is one-letter words ("a b c", table cells), each placed
	// on its own.
	if tracking > 0 && !w.spaces && !slices.ContainsFunc(w.line, func(g lineGlyph) bool { return g.gap > g.thr+tracking }) {
		tracking = 0
	}
	for _, g := range w.line {
		if err := w.put(g, tracking); err != nil {
			return err
		}
	}
	w.line, w.samples, w.spaces = w.line[:0], w.samples[:0], false
	return nil
}

// put writes g's text, after a space where it starts a word.
func (w *pageWriter) put(g lineGlyph, tracking float64) error {
	if (g.jumped || g.gap > g.thr+tracking) && !w.spaced && w.b.Len() > 0 && !isSpace(g.text) {
		if err := w.write(" "); err != nil {
			return err
		}
	}
	return w.write(g.text)
}

// tracking is the spacing the held line puts between letters (em): the
// lower quartile of its letter gaps, so that the gaps after a quarter of the
// letters (the last of each word in a line placed word by word) do not
// count, nor kerning pairs much.
func (w *pageWriter) tracking() float64 {
	if len(w.samples) < minTrackingSamples {
		return 0
	}
	slices.Sort(w.samples)
	return min(max(w.samples[len(w.samples)/4], 0), maxTracking)
}

// end writes what is held: the page's content has ended.
func (w *pageWriter) end() error { return w.endLine() }

// isLetter is a glyph whose text starts with a letter or a digit.
func isLetter(s string) bool {
	if s == "" {
		return false
	}
	if c := s[0]; c < utf8.RuneSelf {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// isSpace is a glyph whose text is all white space.
func isSpace(s string) bool {
	if s == "" || s[0] > ' ' && s[0] < 0x80 {
		return false // the common case, a letter
	}
	return strings.TrimSpace(s) == ""
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
