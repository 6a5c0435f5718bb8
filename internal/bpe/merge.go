package bpe

import "unicode/utf8"

// The byte-pair merge, as tiktoken does it: the piece starts as its bytes,
// one part each; while two neighbouring parts together are a token, the
// pair with the lowest rank (the leftmost of equals) becomes one part. The
// number of parts left is the piece's count.

// shortPiece is the longest piece merged by scanning every pair for the
// lowest on each step, as tiktoken-go does: quadratic, but with the
// arrays on the stack and no allocation, the quickest for the short
// pieces that are nearly all of them. Longer ones keep their pairs in a heap.
const shortPiece = 128

// maxPiece bounds the bytes merged at once. A longer piece (a run of
// letters with no space: base64, minified data) is counted maxPiece bytes
// at a time, cut at a character's start, which can shift its count by a
// token or so per cut; merging it whole would take memory in proportion
// to its length (about 40 bytes per byte), and tiktoken-go, quadratic,
// would take hours on such a piece anyway.
const maxPiece = 64 << 10

// countPiece returns the number of tokens piece (not empty) encodes to.
func (t *Table) countPiece(piece string) int {
	if len(piece) == 1 || t.Rank(piece) != noRank {
		return 1
	}
	if len(piece) <= shortPiece {
		return t.mergeShort(piece)
	}
	n := 0
	for len(piece) > maxPiece {
		cut := maxPiece
		for cut > 0 && !utf8.RuneStart(piece[cut]) {
			cut--
		}
		n += t.mergeLong(piece[:cut])
		piece = piece[cut:]
	}
	if len(piece) <= shortPiece {
		return n + t.mergeShort(piece)
	}
	return n + t.mergeLong(piece)
}

// pairRank is the rank of piece[a:b], or noRank.
func (t *Table) pairRank(piece string, a, b int32) uint32 {
	return t.Rank(piece[a:b])
}

// mergeShort merges piece (at most shortPiece bytes) by scanning.
func (t *Table) mergeShort(piece string) int {
	// start[k] is where part k begins; start[parts] is len(piece).
	// rank[k] is the rank of parts k and k+1 together.
	var start [shortPiece + 1]int32
	var rank [shortPiece + 1]uint32
	parts := len(piece)
	for k := range parts + 1 {
		start[k] = int32(k)
	}
	for k := range parts - 1 {
		rank[k] = t.pairRank(piece, start[k], start[k+2])
	}
	rank[parts-1] = noRank
	for parts > 1 {
		best, k := uint32(noRank), -1
		for j := range parts - 1 {
			if rank[j] < best {
				best, k = rank[j], j
			}
		}
		if k < 0 {
			break
		}
		// Parts k and k+1 become one: its pairs with either neighbour are new.
		if k+2 < parts {
			rank[k] = t.pairRank(piece, start[k], start[k+3])
		} else {
			rank[k] = noRank
		}
		if k > 0 {
			rank[k-1] = t.pairRank(piece, start[k-1], start[k+2])
		}
		copy(start[k+1:parts], start[k+2:parts+1])
		copy(rank[k+1:parts-1], rank[k+2:parts])
		parts--
	}
	return parts
}

// mergeLong merges piece with its pairs in a heap, in time n log n.
// It merges in the same order as mergeShort: lowest rank first, and of
// equal ranks the leftmost (the heap orders by rank, then by position).
func (t *Table) mergeLong(piece string) int {
	n := int32(len(piece))
	// Parts are named by the byte they begin at. next[p] is the part after
	// p (n after the last); prev[p] the one before (-1 before the first);
	// rank[p] the rank of p and next[p] together, noRank once p is merged
	// into the part before it.
	next := make([]int32, n)
	prev := make([]int32, n)
	rank := make([]uint32, n)
	h := pairHeap(make([]uint64, 0, n))
	pair := func(p int32) uint32 {
		q := next[p]
		if q >= n {
			return noRank
		}
		return t.pairRank(piece, p, next[q])
	}
	for p := range n {
		next[p], prev[p] = p+1, p-1
	}
	for p := range n {
		rank[p] = pair(p)
		if rank[p] != noRank {
			h.push(rank[p], p)
		}
	}
	parts := int(n)
	for len(h) > 0 {
		r, p := h.pop()
		if rank[p] != r {
			continue // stale: p's pair changed since, or p is gone
		}
		q := next[p]
		next[p] = next[q]
		if next[q] < n {
			prev[next[q]] = p
		}
		rank[q] = noRank
		parts--
		if rank[p] = pair(p); rank[p] != noRank {
			h.push(rank[p], p)
		}
		if o := prev[p]; o >= 0 {
			if rank[o] = pair(o); rank[o] != noRank {
				h.push(rank[o], o)
			}
		}
	}
	return parts
}

// pairHeap is a binary min-heap of rank<<32 | position.
type pairHeap []uint64

func (h *pairHeap) push(rank uint32, p int32) {
	*h = append(*h, uint64(rank)<<32|uint64(uint32(p)))
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if s[up] <= s[i] {
			break
		}
		s[up], s[i] = s[i], s[up]
		i = up
	}
}

func (h *pairHeap) pop() (uint32, int32) {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		if r := l + 1; r < len(s) && s[r] < s[l] {
			l = r
		}
		if s[i] <= s[l] {
			break
		}
		s[i], s[l] = s[l], s[i]
		i = l
	}
	*h = s
	return uint32(top >> 32), int32(uint32(top))
}
