package pdftext

import (
	"context"
	"strings"
	"testing"

	"koe/internal/pdftext/pdftest"
)

// wordsLines is the known text the producers set: capitals and the
// kerning pairs that pull letters together, narrow and wide letters.
var wordsLines = []string{
	"Which telescope does the Kumo Dome observatory use?",
	"The Kumo Dome bought its Wavefront AVAT telescope in 1998.",
	"Typography: LT To Ye Wavy office fjord, (ibid.) im-mill.",
}

// TestWordsFromGlyphPositions sets the known text the ways producers
// place glyphs, and reads every word whole and separated from the next
// by one space, each line on its own.
func TestWordsFromGlyphPositions(t *testing.T) {
	const (
		times   = 250 // Times' space, thousandths of the font size
		squeeze = 190 // a Times space squeezed as far as TeX shrinks it
	)
	tests := []struct {
		name string
		ts   pdftest.Typesetting
	}{
		{"one string", pdftest.Typesetting{Placement: pdftest.PlaceLine}},
		{"one string justified by Tw, stretched", pdftest.Typesetting{Placement: pdftest.PlaceLine, WordGap: 900}},
		{"one string justified by Tw, squeezed", pdftest.Typesetting{Placement: pdftest.PlaceLine, Space: times, WordGap: squeeze}},
		{"one string letter-spaced by Tc", pdftest.Typesetting{Placement: pdftest.PlaceLine, Tracking: 250}},
		{"kerned TJ (LibreOffice)", pdftest.Typesetting{Placement: pdftest.PlaceKernedTJ}},
		{"kerned TJ justified by TJ gaps after the spaces", pdftest.Typesetting{Placement: pdftest.PlaceKernedTJ, WordGap: 700}},
		{"kerned TJ in a composite font", pdftest.Typesetting{Placement: pdftest.PlaceKernedTJ, Composite: true}},
		{"kerned TJ scaled 150%", pdftest.Typesetting{Placement: pdftest.PlaceKernedTJ, Scale: 150}},
		{"word gaps in TJ (TeX)", pdftest.Typesetting{Placement: pdftest.PlaceWordsTJ, Space: 333}},
		{"word gaps in TJ, justified squeezed", pdftest.Typesetting{Placement: pdftest.PlaceWordsTJ, Space: times, WordGap: squeeze}},
		{"word gaps in TJ, justified stretched", pdftest.Typesetting{Placement: pdftest.PlaceWordsTJ, WordGap: 1400}},
		{"word gaps in TJ, letter-spaced by Tc", pdftest.Typesetting{Placement: pdftest.PlaceWordsTJ, Tracking: 250, WordGap: 300}},
		{"word gaps in TJ, rotated 30°", pdftest.Typesetting{Placement: pdftest.PlaceWordsTJ, Rotate: 30}},
		{"glyph by glyph by Td (Chromium)", pdftest.Typesetting{Placement: pdftest.PlaceGlyphTd, Composite: true, Flipped: true}},
		{"glyph by glyph by Td, letter-spaced (Chromium)", pdftest.Typesetting{Placement: pdftest.PlaceGlyphTd, Composite: true, Flipped: true, Tracking: 300}},
		{"glyph by glyph by Td, a glyph without text", pdftest.Typesetting{Placement: pdftest.PlaceGlyphTd, Composite: true, Flipped: true, Unmapped: 'f'}},
		{"glyph by glyph by Tm", pdftest.Typesetting{Placement: pdftest.PlaceGlyphTm}},
		{"glyph by glyph by Tm, squeezed", pdftest.Typesetting{Placement: pdftest.PlaceGlyphTm, Space: times, WordGap: squeeze}},
		{"glyph by glyph by Tm, condensed 60%", pdftest.Typesetting{Placement: pdftest.PlaceGlyphTm, Space: times, WordGap: squeeze, Scale: 60}},
		{"glyph by glyph by Tm, flipped page", pdftest.Typesetting{Placement: pdftest.PlaceGlyphTm, Composite: true, Flipped: true}},
		{"glyph by glyph by Tm, rotated 90°", pdftest.Typesetting{Placement: pdftest.PlaceGlyphTm, Rotate: 90}},
		{"glyph by glyph by Tm, small print", pdftest.Typesetting{Placement: pdftest.PlaceGlyphTm, Size: 4}},
		{"word by word by Td", pdftest.Typesetting{Placement: pdftest.PlaceWordTd}},
		{"word by word by Td, squeezed", pdftest.Typesetting{Placement: pdftest.PlaceWordTd, Space: times, WordGap: squeeze}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := strings.Join(wordsLines, "\n")
			if tt.ts.Unmapped != 0 {
				want = strings.ReplaceAll(want, string(tt.ts.Unmapped), "")
			}
			doc, err := Extract(context.Background(), pdftest.Typeset(tt.ts, wordsLines...))
			if err != nil {
				t.Fatal(err)
			}
			if doc.Pages[0] != want {
				t.Fatalf("got\n%s\nwant\n%s", doc.Pages[0], want)
			}
		})
	}
}

// A standard Courier without widths in the file has the widths every
// reader knows (600): "K" ends where "umo" starts.
func TestWordsInStandardCourierWithoutWidths(t *testing.T) {
	data := pdftest.PageWith("BT /F1 10 Tf 72 720 Td (K) Tj 6 0 Td (umo) Tj 24 0 Td (Dome) Tj ET", "/Font << /F1 3 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Courier-Bold /Encoding /WinAnsiEncoding >>")
	doc, err := Extract(context.Background(), data)
	if err != nil || doc.Pages[0] != "Kumo Dome" {
		t.Fatalf("got %q, %v", doc.Pages, err)
	}
}

// A letter-spaced line longer than a reader holds at once is decided in
// parts, each by its own letter gaps, and still reads word for word.
func TestWordsOfALineLongerThanIsHeld(t *testing.T) {
	words := strings.Fields(strings.Repeat(wordsLines[1]+" ", 40))
	line := strings.Join(words, " ")
	if len(line) < 2*maxLineGlyphs {
		t.Fatalf("a line of %d glyphs is held whole", len(line))
	}
	ts := pdftest.Typesetting{Placement: pdftest.PlaceGlyphTd, Composite: true, Flipped: true, Tracking: 300, Size: 2}
	doc, err := Extract(context.Background(), pdftest.Typeset(ts, line))
	if err != nil || doc.Pages[0] != line {
		t.Fatalf("got %q, %v", doc.Pages, err)
	}
}

// Character spacing is part of a gap, not of a glyph: Ghostscript sets a
// run of one-letter words with it ("r a s" of "whenever a soldering"),
// and a contents line's leader dots, spaced alike, are not letters whose
// spacing tells a line's tracking.
func TestWordsByCharacterSpacingAndLeaders(t *testing.T) {
	tests := []struct{ name, content, want string }{
		{"one-letter words spaced by Tc (Ghostscript)",
			"BT /F2 10 Tf 72 720 Td (wheneve) Tj 42 0 Td 3 Tc (ras) Tj 24 0 Td 0 Tc (oldering iron) Tj ET",
			"whenever a soldering iron"},
		{"leader dots", "BT /F2 10 Tf 72 720 Td (Getting started) Tj 93 0 Td (.) Tj 7.5 0 Td (.) Tj 7.5 0 Td (.) Tj 7.5 0 Td (.) Tj 7.5 0 Td (.) Tj 7.5 0 Td (.) Tj 10 0 Td (7) Tj ET",
			"Getting started ...... 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Extract(context.Background(), pdftest.Build("", pdftest.Page{Content: tt.content}))
			if err != nil || doc.Pages[0] != tt.want {
				t.Fatalf("got %q, %v; want %q", doc.Pages, err, tt.want)
			}
		})
	}
}
