package textindex

import (
	"slices"
)

// better orders hits best first: higher score, then lower id, so that equal
// scores rank the same way every time.
func better(a, b Hit) bool {
	return a.Score > b.Score || a.Score == b.Score && a.ID < b.ID
}

func compareHits(a, b Hit) int {
	if better(a, b) {
		return -1
	}
	if better(b, a) {
		return 1
	}
	return 0
}

// Top returns the k best hits, best first (ties: lower ID first). It keeps a
// heap of the k best seen rather than sorting all hits: recall scores
// thousands of turns to keep ten. k <= 0 returns nil. Top works in place: it
// reorders hits and the result shares hits' memory.
func Top(hits []Hit, k int) []Hit {
	if k <= 0 || len(hits) == 0 {
		return nil
	}
	if k >= len(hits) {
		slices.SortFunc(hits, compareHits)
		return hits
	}
	// hits[:k] is a heap with the worst of the k best at the root.
	heap := hits[:k]
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(heap, i)
	}
	for _, h := range hits[k:] {
		if better(h, heap[0]) {
			heap[0] = h
			siftDown(heap, 0)
		}
	}
	slices.SortFunc(heap, compareHits)
	return heap
}

// siftDown restores the heap property below i, the worst hit on top.
func siftDown(heap []Hit, i int) {
	for {
		worst := i
		if l := 2*i + 1; l < len(heap) && better(heap[worst], heap[l]) {
			worst = l
		}
		if r := 2*i + 2; r < len(heap) && better(heap[worst], heap[r]) {
			worst = r
		}
		if worst == i {
			return
		}
		heap[i], heap[worst] = heap[worst], heap[i]
		i = worst
	}
}

// Fuse combines ranked lists (each best first) by reciprocal-rank fusion:
// score(d) = sum over lists of 1/(k + rank), rank counted from 1; k <= 0
// means 60, the constant of the original paper. Fusion needs ranks only, so
// lists from rankers whose scores do not compare (BM25, recency, vectors)
// combine fairly. A document listed twice in one list counts at its better
// rank. The result is best first, ties to the lower ID.
func Fuse(k int, lists ...[]Hit) []Hit {
	if k <= 0 {
		k = 60
	}
	fused := map[DocID]float64{}
	seen := map[DocID]bool{}
	for _, list := range lists {
		clear(seen)
		for i, h := range list {
			if seen[h.ID] {
				continue
			}
			seen[h.ID] = true
			fused[h.ID] += 1 / float64(k+i+1)
		}
	}
	out := make([]Hit, 0, len(fused))
	for id, s := range fused {
		out = append(out, Hit{ID: id, Score: s})
	}
	slices.SortFunc(out, compareHits)
	return out
}
