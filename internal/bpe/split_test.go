package bpe

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The splitters cut text where regexp2 running the encodings' patterns
// does, piece for piece.
func TestPiecesMatchRegexp2(t *testing.T) {
	texts := []string{
		"", "a", " ", "  ", "\n", " \n ", "hello world", "Hello, World!!  \n\n  x",
		"I'm HERE'S they'RE we'Ve 'll 'd 'x ''s", "abc'", "'", "x's", "ABCdef GHI jKL",
		"ǅemal ʰa ʰA Aʰ", "e\u0301\u0301 \u0301a A\u0301b", "中文English混合テキスト", "한국어 텍스트입니다",
		"12345678 ٣٣٣٣ ⅫⅫⅫⅫ ½½", "x/y//z\r\n/ !!\n\n/", "   \t\t  x", "a \u3000\u3000b", "a\u00a0 b",
		"\r\n\r\n  \n  ", "end with spaces   ", "end with newline spaces \n  ", "🍕🍕 👨‍👩‍👧 🇯🇵!",
		"\xff\xfe not utf-8 \xed\xa0\x80", "<|endoftext|><|im_start|>",
	}
	rng := rand.New(rand.NewPCG(33, 1))
	for range 3000 {
		texts = append(texts, randomText(rng, 1+rng.IntN(30)))
	}
	for _, name := range refNames {
		e := testEncoding(t, name)
		for _, text := range texts {
			got, want := e.Pieces(text), refPieces(t, name, text)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %q is cut into\n%q, regexp2 cuts\n%q", name, text, got, want)
			}
			if strings.Join(got, "") != replaceInvalid(text) {
				t.Fatalf("%s: the pieces of %q do not join into it", name, text)
			}
		}
	}
}
