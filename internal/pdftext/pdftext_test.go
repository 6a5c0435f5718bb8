package pdftext

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/internal/pdftext/pdftest"
)

// twoPages has lines placed with Td in Helvetica (no widths), then,
// deflated, words spaced by TJ kerning in Courier as TeX writes them.
func twoPages(title string) []byte {
	return pdftest.Build(title,
		pdftest.Page{Content: "BT /F1 12 Tf 72 720 Td (Hello from koe.) Tj 0 -16 Td (Second line, caf\\351.) Tj ET"},
		pdftest.Page{Content: "BT /F2 10 Tf 72 700 Td [(W)20(ord)-600(spacing)-600(by)-600(kerning.)] TJ 0 -14 Td (Courier keeps its widths.) Tj ET", Compress: true},
	)
}

func TestExtract(t *testing.T) {
	doc, err := Extract(context.Background(), twoPages("  The   Report "))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Hello from koe.\nSecond line, café.", "Word spacing by kerning.\nCourier keeps its widths."}
	if !slices.Equal(doc.Pages, want) || doc.Title != "The Report" {
		t.Fatalf("got %q, title %q", doc.Pages, doc.Title)
	}
}

func TestExtractKeepsEmptyPagesInPlace(t *testing.T) {
	data := pdftest.Build("",
		pdftest.Page{Content: "BT /F1 12 Tf 72 720 Td (one) Tj ET"},
		pdftest.Page{Content: "0 0 m 100 100 l S"},
		pdftest.Page{Content: "BT /F1 12 Tf 72 720 Td (\\376ne three) Tj ET"},
	)
	doc, err := Extract(context.Background(), data)
	if err != nil || !slices.Equal(doc.Pages, []string{"one", "", "þne three"}) || doc.Title != "" {
		t.Fatalf("got %q %q, %v", doc.Pages, doc.Title, err)
	}
}

// Fonts draw fi, ff, fl as one glyph; search needs the letters.
func TestLigatures(t *testing.T) {
	if got := ligatures.Replace("\uFB01rst o\uFB00er \uFB02oor"); got != "first offer floor" {
		t.Fatalf("got %q", got)
	}
}

// A PDF 2.0 file is read like a 1.7 one: the library's header check
// knows versions up to 1.7 only.
func TestExtractPDF20(t *testing.T) {
	data := pdftest.Minimal(true, "version two")
	data = append([]byte("%PDF-2.0"), data[len("%PDF-1.4"):]...)
	doc, err := Extract(context.Background(), data)
	if err != nil || doc.Pages[0] != "version two" {
		t.Fatalf("got %q, %v", doc.Pages, err)
	}
	if !bytes.HasPrefix(data, []byte("%PDF-2.0")) {
		t.Fatal("Extract changed the caller's bytes")
	}
}

func TestExtractErrors(t *testing.T) {
	good := string(twoPages(""))
	tests := []struct {
		name   string
		data   string
		want   error
		reason string
	}{
		{"no text", string(pdftest.Build("", pdftest.Page{Content: "0 0 m 100 100 l S"})), ErrNoText, ""},
		{"no pages", string(pdftest.Build("")), ErrNoText, ""},
		{"garbage", "%PDF-1.4\nthis is not a PDF at all\n", nil, "not a PDF file: missing %%EOF"},
		{"truncated", good[:len(good)/2], nil, "not a PDF file: missing %%EOF"},
		{"not a PDF", "hello", nil, "not a PDF file: invalid header"},
		// Same length, so the cross-reference offsets still hold.
		{"page tree loop", strings.Replace(good, "/Kids [6 0 R 8 0 R]", "/Kids [2 0 R 8 0 R]", 1), nil, "its page tree is too deep or loops"},
		{"unknown filter", strings.Replace(good, "/Filter /FlateDecode", "/Filter /FlateDecodX", 1), nil, "unknown filter FlateDecodX"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.data == good {
				t.Fatal("the test PDF is not what this case expects")
			}
			doc, err := Extract(context.Background(), []byte(tt.data))
			if doc.Pages != nil || doc.Title != "" {
				t.Errorf("a document with the error: %+v", doc)
			}
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("got %v, want %v", err, tt.want)
				}
				return
			}
			var u *UnreadableError
			if !errors.As(err, &u) || u.Reason != tt.reason {
				t.Fatalf("got %#v, want reason %q", err, tt.reason)
			}
			if err.Error() != "could not be read as a PDF: "+tt.reason {
				t.Fatalf("message %q", err.Error())
			}
		})
	}
}

func TestExtractHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Extract(ctx, twoPages(""))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// A page tree that holds itself ends the call; it does not spin where no
// ctx reaches it.
func TestExtractPageTreeLoopEnds(t *testing.T) {
	looped := strings.Replace(string(twoPages("")), "/Kids [6 0 R 8 0 R]", "/Kids [1 0 R 2 0 R]", 1)
	errc := make(chan error, 1)
	go func() {
		_, err := Extract(context.Background(), []byte(looped))
		errc <- err
	}()
	select {
	case err := <-errc:
		var u *UnreadableError
		if !errors.As(err, &u) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the page tree's loop held the call")
	}
}

// FuzzExtract gives the reader broken files: each is a document or one of
// the documented errors, never a panic.
func FuzzExtract(f *testing.F) {
	f.Add(pdftest.Minimal(false, "Hello (world)"))
	f.Add(pdftest.Minimal(true, "deflated"))
	f.Add(twoPages("title"))
	f.Add([]byte("%PDF-1.4\n"))
	f.Add([]byte("%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF"))
	f.Add(pdftest.ClassicXref(""))
	f.Add(pdftest.StreamXref("/Size 3 /W [1 2 1]", []byte{0, 0, 0, 0, 1, 0, 9, 0, 1, 0, 58, 0}))
	f.Add(pdftest.ObjectStream("/N 1", 1))
	f.Add(pdftest.ObjectStreamInItself())
	f.Add(pdftest.InflatingCMap(4<<10, 2))
	f.Add(pdftest.Typeset(pdftest.Typesetting{Placement: pdftest.PlaceGlyphTd, Composite: true, Flipped: true, Tracking: 300}, "Kumo Dome"))
	f.Add(pdftest.Typeset(pdftest.Typesetting{Placement: pdftest.PlaceWordsTJ, Rotate: 30, Scale: 60}, "Kumo Dome"))
	f.Add(formPage("/X1 Do", "/X1 5 0 R", []string{"BT /F1 10 Tf (x) Tj ET /X1 Do"}, []string{" /Matrix [1 0 0 1 5 5] /Resources << /XObject << /X1 5 0 R >> >>"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		doc, err := Extract(context.Background(), data)
		var u *UnreadableError
		switch {
		case err == nil && len(doc.Pages) == 0:
			t.Fatal("no error and no pages")
		case err == nil:
		case errors.Is(err, ErrEncrypted), errors.Is(err, ErrNoText):
		case errors.As(err, &u):
			if u.Reason == "" || strings.Contains(u.Reason, "\n") || len([]rune(u.Reason)) > maxReasonChars {
				t.Fatalf("reason %q", u.Reason)
			}
		default:
			t.Fatalf("undocumented error %#v", err)
		}
	})
}
