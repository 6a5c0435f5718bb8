package pdftext

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"koe/internal/pdftext/pdftest"
)

// formPage is a one-page PDF whose page draws content with fonts F1
// (Courier, 600 wide), F2 (Helvetica) and XObjects named in xobjects; forms are the
// streams of the form XObjects, added as objects 5, 6, ... in order, each
// with the dictionary entries extra[i].
func formPage(content string, xobjects string, forms []string, extra []string) []byte {
	objects := []string{
		"<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
	}
	for i, body := range forms {
		objects = append(objects, fmt.Sprintf("<< /Type /XObject /Subtype /Form /BBox [0 0 612 792]%s /Length %d >>\nstream\n%s\nendstream", extra[i], len(body), body))
	}
	return pdftest.PageWith(content, "/Font << /F1 3 0 R /F2 4 0 R >> /XObject << "+xobjects+" >>", objects...)
}

// The text of a form XObject is the page's, where its matrix puts it:
// Chromium draws transformed elements (a scaled line) as forms.
func TestExtractFormXObjects(t *testing.T) {
	tests := []struct {
		name, content, xobjects string
		forms, extra            []string
		want                    string
	}{
		{
			// 4 Courier glyphs of 10 end at 96; the form's matrix starts
			// its text at 102, a word gap further along the same line.
			"moved by its matrix onto the line", "BT /F1 10 Tf 72 720 Td (Kumo) Tj ET /X1 Do", "/X1 5 0 R",
			[]string{"BT /F1 10 Tf 0 0 Td (Dome) Tj ET"}, []string{" /Matrix [1 0 0 1 102 720]"},
			"Kumo Dome",
		},
		{
			"scaled by its matrix, its glyphs kept together", "BT /F1 10 Tf 72 720 Td (Squeezed) Tj ET /X1 Do", "/X1 5 0 R",
			[]string{"BT /F1 10 Tf 0 0 Td (Kumo) Tj 30 0 Td (Dome) Tj ET"}, []string{" /Matrix [0.5 0 0 1 72 700]"},
			"Squeezed\nKumo Dome",
		},
		{
			// F1 is Helvetica (no widths) in the form's resources, Courier
			// on the page: in the page's font "ab" would end where "cd"
			// starts.
			"its own resources", "BT /F1 10 Tf 72 720 Td (page) Tj ET /X1 Do", "/X1 5 0 R",
			[]string{"BT /F1 10 Tf 72 700 Td (ab) Tj 12 0 Td (cd) Tj ET"}, []string{" /Resources << /Font << /F1 4 0 R >> >>"},
			"page\nab cd",
		},
		{
			"a form inside a form", "/X1 Do", "/X1 5 0 R /X2 6 0 R",
			[]string{"BT /F1 10 Tf 72 720 Td (outer) Tj ET /X2 Do", "BT /F1 10 Tf 72 700 Td (inner) Tj ET"}, []string{"", ""},
			"outer\ninner",
		},
		{
			"an image is not read", "/Im1 Do BT /F1 10 Tf 72 720 Td (after) Tj ET", "/Im1 5 0 R",
			[]string{"BT /F1 10 Tf (not text) Tj ET"}, []string{" /Subtype /Image"},
			"after",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Extract(context.Background(), formPage(tt.content, tt.xobjects, tt.forms, tt.extra))
			if err != nil || doc.Pages[0] != tt.want {
				t.Fatalf("got %q, %v; want %q", doc.Pages, err, tt.want)
			}
		})
	}
}

// A form that draws itself, many times over, ends: its depth is bounded,
// and each drawing is charged to the budget.
func TestExtractBoundsFormsDrawingThemselves(t *testing.T) {
	tests := []struct {
		name, form string
		limited    bool
	}{
		{"once each time", "BT /F1 10 Tf 72 720 Td (x) Tj ET /X1 Do", false},
		{"64 times each time", "BT /F1 10 Tf 72 720 Td (x) Tj ET " + strings.Repeat("/X1 Do ", 64), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errc := make(chan error, 1)
			go func() {
				_, err := Extract(context.Background(), formPage("/X1 Do", "/X1 5 0 R", []string{tt.form}, []string{" /Resources << /Font << /F1 3 0 R >> /XObject << /X1 5 0 R >> >>"}))
				errc <- err
			}()
			select {
			case err := <-errc:
				var limit *LimitError
				if tt.limited != errors.As(err, &limit) || !tt.limited && err != nil {
					t.Fatalf("got %v", err)
				}
			case <-time.After(60 * time.Second): // a hang guard
				t.Fatal("a form drawing itself held the call")
			}
		})
	}
}

// A form whose resources are written out at a megabyte and that draws
// itself many times over costs its resources' text against the budget
// each time it is drawn, and remembers it as a digest: the file is
// refused having read little, where it once made koe write the
// megabyte out for every one of some thirty thousand drawings.
func TestExtractChargesLargeFormResources(t *testing.T) {
	pad := " /Pad [" + strings.Repeat("0 ", 1<<19) + "]"
	form := "BT /F1 10 Tf 72 720 Td (x) Tj ET " + strings.Repeat("/X1 Do ", 64)
	data := formPage("/X1 Do", "/X1 5 0 R", []string{form}, []string{" /Resources << /Font << /F1 3 0 R >> /XObject << /X1 5 0 R >>" + pad + " >>"})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Extract(context.Background(), data)
	runtime.ReadMemStats(&after)
	var limit *LimitError
	if !errors.As(err, &limit) {
		t.Fatalf("got %v, want the inflated-bytes limit", err)
	}
	// The budget is 128 MiB of charged bytes; what is allocated in all,
	// garbage as it goes, stays under 2 GiB (1.3 under the race detector:
	// the work of the thirty thousand drawings the budget allows), not
	// the gigabytes of the megabyte written and parsed per drawing.
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 2<<30 {
		t.Errorf("reading the file allocated %d MiB", allocated>>20)
	}
}
