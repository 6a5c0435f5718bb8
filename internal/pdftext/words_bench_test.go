package pdftext

import (
	"context"
	"testing"

	"koe/internal/pdftext/pdftest"
)

// BenchmarkExtractPlacedGlyphs reads a page of 60 lines set glyph by
// glyph, letter-spaced, as Chromium prints letter-spaced text: every gap
// is weighed, and every line's tracking read.
func BenchmarkExtractPlacedGlyphs(b *testing.B) {
	lines := make([]string, 60)
	for i := range lines {
		lines[i] = wordsLines[i%len(wordsLines)]
	}
	data := pdftest.Typeset(pdftest.Typesetting{Placement: pdftest.PlaceGlyphTd, Composite: true, Flipped: true, Tracking: 300}, lines...)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Extract(context.Background(), data); err != nil {
			b.Fatal(err)
		}
	}
}
