package bpe

import (
	"sync"
	"testing"

	"github.com/dlclark/regexp2"
	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// The reference: tiktoken-go, from the same embedded vocabularies.

// refNames are the encodings compared with tiktoken-go (p50k_edit is
// p50k_base's ranks and pattern).
var refNames = []string{"o200k_base", "cl100k_base", "p50k_base", "r50k_base"}

var (
	refMu        sync.Mutex
	refEncodings = map[string]*tiktoken.Tiktoken{}
	ourEncodings = map[string]*Encoding{}
)

// refEncoding returns tiktoken-go's encoding called name, built once per test binary.
func refEncoding(t testing.TB, name string) *tiktoken.Tiktoken {
	t.Helper()
	refMu.Lock()
	defer refMu.Unlock()
	if tk, ok := refEncodings[name]; ok {
		return tk
	}
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	tk, err := tiktoken.GetEncoding(name)
	if err != nil {
		t.Fatalf("tiktoken-go %s: %v", name, err)
	}
	refEncodings[name] = tk
	return tk
}

// testEncoding returns our encoding called name, built once per test binary.
func testEncoding(t testing.TB, name string) *Encoding {
	t.Helper()
	refMu.Lock()
	defer refMu.Unlock()
	if e, ok := ourEncodings[name]; ok {
		return e
	}
	e, err := Load(name)
	if err != nil {
		t.Fatal(err)
	}
	ourEncodings[name] = e
	return e
}

// refPatterns are the split patterns tiktoken-go compiles for each encoding.
var refPatterns = map[string]string{
	"o200k_base": `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"cl100k_base": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"p50k_base":   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
	"r50k_base":   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
}

var (
	refRegexpsOnce sync.Once
	refRegexps     map[string]*regexp2.Regexp
)

// refPieces returns text cut by the encoding's pattern as regexp2 cuts
// it, the way tiktoken-go does: over the text's runes.
func refPieces(t testing.TB, name, text string) []string {
	t.Helper()
	refRegexpsOnce.Do(func() {
		refRegexps = map[string]*regexp2.Regexp{}
		for n, p := range refPatterns {
			refRegexps[n] = regexp2.MustCompile(p, regexp2.None)
		}
	})
	runes := []rune(text)
	var pieces []string
	m, err := refRegexps[name].FindRunesMatch(runes)
	for ; m != nil && err == nil; m, err = refRegexps[name].FindNextMatch(m) {
		pieces = append(pieces, string(runes[m.Index:m.Index+m.Length]))
	}
	if err != nil {
		t.Fatal(err)
	}
	return pieces
}

// refCount is tiktoken-go's count of text.
func refCount(t testing.TB, name, text string) int {
	return len(refEncoding(t, name).EncodeOrdinary(text))
}
