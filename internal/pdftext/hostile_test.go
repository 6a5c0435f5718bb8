package pdftext

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"koe/internal/pdftext/pdftest"
)

// A file of a few kilobytes whose pages inflate to megabytes each is
// refused once the document as a whole is over the budget, though every
// page alone is under it.
func TestExtractBoundsTheDocumentNotThePage(t *testing.T) {
	data := pdftest.InflatingPages(4, 1<<20, false)
	if len(data) > 16<<10 {
		t.Fatalf("the hostile file is %d bytes", len(data))
	}
	lim := Limits{MaxInflated: 3 << 20}
	_, err := ExtractWithin(context.Background(), data, lim)
	var over *LimitError
	if !errors.As(err, &over) || over.Limit != lim.MaxInflated {
		t.Fatalf("got %v, want a *LimitError at %d", err, lim.MaxInflated)
	}
	if err.Error() != "its streams and text inflate to more than 3 MB" {
		t.Fatalf("message %q", err.Error())
	}
	// Within a budget that holds it, the same file reads.
	doc, err := ExtractWithin(context.Background(), data, Limits{MaxInflated: 16 << 20})
	if err != nil || len(doc.Pages) != 4 || !strings.HasPrefix(doc.Pages[3], "aaaaaaaa") {
		t.Fatalf("got %d pages, %v", len(doc.Pages), err)
	}
}

// Pages that all draw one stream cost what they draw: the stream counts
// each time.
func TestExtractCountsASharedStreamEachTimeItIsDrawn(t *testing.T) {
	data := pdftest.InflatingPages(8, 1<<20, true)
	if len(data) > 8<<10 {
		t.Fatalf("the hostile file is %d bytes", len(data))
	}
	_, err := ExtractWithin(context.Background(), data, Limits{MaxInflated: 4 << 20})
	var over *LimitError
	if !errors.As(err, &over) {
		t.Fatalf("got %v, want a *LimitError", err)
	}
}

// A font's character map that inflates past the budget is refused,
// though its page draws a few glyphs.
func TestExtractBoundsACharacterMap(t *testing.T) {
	data := pdftest.InflatingCMap(8<<20, 1)
	_, err := ExtractWithin(context.Background(), data, Limits{MaxInflated: 2 << 20})
	var over *LimitError
	if !errors.As(err, &over) {
		t.Fatalf("got %v, want a *LimitError", err)
	}
}

// A page that selects the same font thousands of times reads its
// character map once: the library read it again at every selection.
func TestExtractReadsACharacterMapOncePerDocument(t *testing.T) {
	data := pdftest.InflatingCMap(1<<20, 2000)
	doc, err := ExtractWithin(context.Background(), data, Limits{MaxInflated: 4 << 20})
	if err != nil || len(doc.Pages) != 1 || doc.Pages[0] != pdftest.CMapText {
		t.Fatalf("got %q, %v", doc.Pages, err)
	}
}

// countdown is a context that ends after its Err has been asked n times:
// a way to end a call in the middle of its work without a clock.
type countdown struct {
	context.Context
	left atomic.Int64
}

func newCountdown(n int64) *countdown {
	c := &countdown{Context: context.Background()}
	c.left.Store(n)
	return c
}

func (c *countdown) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// A context that ends while one long page is read ends the call there,
// not after the page: the reader checks it as it reads the stream.
func TestExtractStopsInsideAPage(t *testing.T) {
	data := pdftest.InflatingPages(1, 8<<20, false)
	// Enough checks to open the file and reach the page, far fewer than
	// reading 8 MiB takes.
	ctx := newCountdown(20)
	doc, err := ExtractWithin(ctx, data, Limits{MaxInflated: 64 << 20})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %d pages, %v; want context.Canceled", len(doc.Pages), err)
	}
	if left := ctx.left.Load(); left > 0 {
		t.Fatalf("the call ended before the context did (%d checks left)", left)
	}
}

// A context that ends while the library reads the file's objects ends the
// call with the context's error, not a broken-file one.
func TestExtractStopsInsideTheLibrary(t *testing.T) {
	data := twoPages("")
	for n := int64(1); n < 12; n++ {
		_, err := Extract(newCountdown(n), data)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after %d checks: got %v, want context.Canceled", n, err)
		}
	}
}

// The text of a composite font comes from its character map, its
// spacing from its CIDFont's widths.
func TestExtractCompositeFont(t *testing.T) {
	doc, err := Extract(context.Background(), pdftest.InflatingCMap(4<<10, 3))
	if err != nil || doc.Pages[0] != pdftest.CMapText {
		t.Fatalf("got %q, %v", doc.Pages, err)
	}
}

// oneFontPage is a one-page PDF whose page draws content with Helvetica
// as F1 (no widths), built by hand around extra objects.
func oneFontPage(content, pageExtra string) []byte {
	var f pdftest.File
	catalog := f.Add("")
	tree := f.Add("")
	font := f.Add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	contents := f.Add(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	page := f.Add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R%s >>", tree, font, contents, pageExtra))
	f.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", tree))
	f.Set(tree, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", page))
	return f.Bytes(catalog, 0)
}

func TestExtractContentStreams(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"inline image data is not read as text", "BI /W 2 /H 1 /BPC 8 /CS /G ID \x00(\xff)[ EI\nBT /F1 12 Tf 72 720 Td (after) Tj ET", "after"},
		{"hex strings and escapes", `BT /F1 12 Tf 72 720 Td <48 65 6c 6C 6f> Tj 0 -20 Td (\(a\)\101\n) Tj ET`, "Hello\n(a)A"},
		{"numbers without operators", "BT /F1 12 Tf 72 720 Td " + strings.Repeat("1 ", 200000) + "(kept) Tj ET", "kept"},
		{"saves deeper than kept", strings.Repeat("q ", 100000) + "BT /F1 12 Tf 72 720 Td (deep) Tj ET" + strings.Repeat(" Q", 100000), "deep"},
		{"a page's streams as one", "BT /F1 12 Tf 72 720 Td (one) Tj ET", "one"},
		{"text before any font", "BT 72 720 Td (plain) Tj ET", "plain"},
		{"word spacing by position", "BT /F1 10 Tf 72 720 Td (a) Tj 30 0 Td (b) Tj ET", "a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Extract(context.Background(), oneFontPage(tt.content, ""))
			if err != nil || doc.Pages[0] != tt.want {
				t.Fatalf("got %q, %v; want %q", doc.Pages, err, tt.want)
			}
		})
	}
}

// A page whose Parent is itself, and which has no resources of its own,
// reads: the library's lookup of inherited resources walks such a loop
// forever.
func TestExtractInheritedResourcesLoopEnds(t *testing.T) {
	var f pdftest.File
	catalog := f.Add("")
	tree := f.Add("")
	content := "BT /F1 12 Tf 72 720 Td (looped) Tj ET"
	contents := f.Add(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	page := f.Add("")
	f.Set(page, fmt.Sprintf("<< /Type /Page /Parent %d 0 R /Contents %d 0 R >>", page, contents))
	f.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", tree))
	f.Set(tree, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", page))
	type result struct {
		doc Document
		err error
	}
	done := make(chan result, 1)
	go func() {
		doc, err := Extract(context.Background(), f.Bytes(catalog, 0))
		done <- result{doc, err}
	}()
	select {
	case r := <-done:
		if r.err != nil || r.doc.Pages[0] != "looped" {
			t.Fatalf("got %q, %v", r.doc.Pages, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the Parent loop held the call")
	}
}
