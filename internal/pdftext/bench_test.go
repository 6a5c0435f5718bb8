package pdftext

import (
	"context"
	"testing"

	"koe/internal/pdftext/pdftest"
)

// BenchmarkExtractInflatingPage reads a page of 4 MB of text-showing
// instructions (a file of 10 KB), the size the library's interpreter took
// about a minute and over a gigabyte for.
func BenchmarkExtractInflatingPage(b *testing.B) {
	data := pdftest.InflatingPages(1, 4_000_000, false)
	b.SetBytes(4_000_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Extract(context.Background(), data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExtractSharedStreamsToTheBudget reads 64 pages that all draw
// one stream of 4 MB, until the default budget refuses them.
func BenchmarkExtractSharedStreamsToTheBudget(b *testing.B) {
	data := pdftest.InflatingPages(64, 4_000_000, true)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Extract(context.Background(), data); err == nil {
			b.Fatal("read past the budget")
		}
	}
}

// BenchmarkExtractInflatingCharacterMap refuses a font's character map
// that inflates to 200 MB (a file of 0.5 MB).
func BenchmarkExtractInflatingCharacterMap(b *testing.B) {
	data := pdftest.InflatingCMap(200<<20, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Extract(context.Background(), data); err == nil {
			b.Fatal("read past the budget")
		}
	}
}
