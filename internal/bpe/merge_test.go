package bpe

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The heap merge of long pieces merges exactly as the scan of short ones.
func TestMergeLongMatchesShort(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 2))
	// Pieces of few distinct bytes merge the most, and tie the most.
	alphabets := []string{"ab", "abc", "aaab", " e", "0123456789", "etaoin shrdlu", "\xe4\xb8\xad\xe6\x96\x87"}
	for _, name := range []string{"o200k_base", "cl100k_base", "r50k_base"} {
		table := testEncoding(t, name).Table()
		for range 3000 {
			alphabet := alphabets[rng.IntN(len(alphabets))]
			var b strings.Builder
			for range 2 + rng.IntN(shortPiece-1) {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
			piece := b.String()
			if short, long := table.mergeShort(piece), table.mergeLong(piece); short != long {
				t.Fatalf("%s: %q merges to %d parts by scan, %d by heap", name, piece, short, long)
			}
		}
	}
}

// Pieces longer than shortPiece count as tiktoken-go counts them.
func TestLongPiecesMatchTiktoken(t *testing.T) {
	for _, text := range []string{
		strings.Repeat("ab", 1500),
		strings.Repeat("a", 2000),
		strings.Repeat("Abc", 700) + "'s",
		strings.Repeat("中文", 400),
		strings.Repeat("!?", 600),
		strings.Repeat("1", 3000),
		strings.Repeat(" ", 3000) + "x",
		strings.Repeat("\n", 1000),
		"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg" + strings.Repeat("QUJDRA", 300),
	} {
		for _, name := range refNames {
			if got, want := testEncoding(t, name).Count(text), refCount(t, name, text); got != want {
				t.Errorf("%s: %d bytes starting %q count %d, tiktoken-go %d", name, len(text), text[:20], got, want)
			}
		}
	}
}

// A piece longer than maxPiece is counted a part at a time: about what it
// would be whole, without the memory for all of it at once.
func TestPieceOverMaxPiece(t *testing.T) {
	e := testEncoding(t, "o200k_base")
	piece := strings.Repeat("ab", maxPiece) // 2 × maxPiece bytes, one piece
	if p := e.Pieces(piece); len(p) != 1 {
		t.Fatalf("%d pieces, want 1", len(p))
	}
	whole := e.Table().mergeLong(piece)
	if got := e.Count(piece); got < whole || got > whole+2 {
		t.Errorf("counted in parts %d, whole %d", got, whole)
	}
}
