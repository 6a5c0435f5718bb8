package knowledge

import (
	"fmt"
	"testing"
)

// BenchmarkHybridConfident is the local store's search when the vectors
// count (BenchmarkSearch's random vectors never stand out, so its hybrid
// rows measure the path where they are set aside): each question's vector
// is a stored chunk's, a little disturbed, so the model looks sure of it
// and every chunk of both rankings is scored on both.
func BenchmarkHybridConfident(b *testing.B) {
	const dim = 768
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("local/%dk/hybrid%d", n/1000, dim), func(b *testing.B) {
			c := newCorpus(1)
			x, _, _ := openLocal(b)
			var stored [][]float32
			for d := 0; d*chunksPerDoc < n; d++ {
				id := fmt.Sprintf("doc-%d", d)
				chunks := c.doc(id, min(chunksPerDoc, n-d*chunksPerDoc), dim)
				for _, ch := range chunks {
					stored = append(stored, ch.Vector)
				}
				mustPut(b, x, "c", id, chunks)
			}
			qs := c.queries(1000, dim)
			for i := range qs {
				near := stored[c.rng.IntN(len(stored))]
				for j := range qs[i].Vector {
					qs[i].Vector[j] = near[j] + 0.3*qs[i].Vector[j]
				}
			}
			// The vectors must count, or this measures the other path.
			x.cat.mu.RLock()
			sh := x.cat.shelves["c"]
			best, st := sh.nearestLocked(sh.matrices[dim], mustUnit(b, qs[0].Vector), 1)
			x.cat.mu.RUnlock()
			if w := vectorWeight(best[0].Score, st); w == 0 {
				b.Fatalf("the vectors have no say (best %.3f, mean %.3f, sd %.3f)", best[0].Score, st.mean, st.std)
			}
			benchSearch(b, x, qs)
		})
	}
}

func mustUnit(b *testing.B, v []float32) []float32 {
	u, err := unit(v)
	if err != nil {
		b.Fatal(err)
	}
	return u
}
