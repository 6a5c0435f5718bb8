package bpe

import (
	"slices"
	"testing"
)

// FuzzTokenCountMatchesTiktoken compares, on arbitrary strings, the pieces
// with regexp2's and the counts with tiktoken-go's, for every encoding.
// Run it with
//
//	go test ./internal/bpe -run '^$' -fuzz FuzzTokenCountMatchesTiktoken -fuzztime 5m
//
// and commit what it adds under testdata/fuzz.
func FuzzTokenCountMatchesTiktoken(f *testing.F) {
	for _, text := range corpusTexts {
		f.Add(text[:min(len(text), 300)])
	}
	for _, text := range trickyAlphabet {
		f.Add(text)
	}
	f.Add("I'm here, 'S THEY'RE 12345 x/y\r\n\r\n  z   ")
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 1024 {
			return // tiktoken-go's merge is quadratic in a piece's length: keep the fuzzer quick
		}
		for _, name := range refNames {
			e := testEncoding(t, name)
			if got, want := e.Pieces(text), refPieces(t, name, text); !slices.Equal(got, want) {
				t.Fatalf("%s: %q is cut into %q, regexp2 cuts %q", name, text, got, want)
			}
			if got, want := e.Count(text), refCount(t, name, text); got != want {
				t.Fatalf("%s: %q counts %d, tiktoken-go %d", name, text, got, want)
			}
		}
	})
}
