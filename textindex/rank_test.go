package textindex

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestTopAgainstFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for round := range 500 {
		n := rng.IntN(200)
		hits := make([]Hit, n)
		for i := range hits {
			// Few distinct scores, so ties are common and must break by id.
			hits[i] = Hit{ID: DocID(rng.IntN(1000)), Score: float64(rng.IntN(8))}
		}
		sorted := slices.Clone(hits)
		slices.SortStableFunc(sorted, func(a, b Hit) int {
			if a.Score != b.Score {
				if a.Score > b.Score {
					return -1
				}
				return 1
			}
			return int(a.ID) - int(b.ID)
		})
		k := rng.IntN(n+5) - 2
		got := Top(slices.Clone(hits), k)
		var want []Hit
		if k > 0 {
			want = sorted[:min(k, n)]
		}
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("round %d: Top(%d of %d) = %v, want %v", round, k, n, got, want)
		}
		if k <= 0 && got != nil {
			t.Fatalf("Top(k=%d) = %v, want nil", k, got)
		}
	}
}

func TestFuseByHand(t *testing.T) {
	a := []Hit{{ID: 1}, {ID: 2}, {ID: 3}}
	b := []Hit{{ID: 3}, {ID: 1}, {ID: 3}} // 3 twice: its better rank counts
	got := Fuse(1, a, b)
	// k = 1: doc 1: 1/2 + 1/3; doc 2: 1/3; doc 3: 1/4 + 1/2.
	want := []Hit{{1, 1.0/2 + 1.0/3}, {3, 1.0/4 + 1.0/2}, {2, 1.0 / 3}}
	if len(got) != len(want) {
		t.Fatalf("Fuse = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-12 {
			t.Fatalf("Fuse = %v, want %v", got, want)
		}
	}

	// k <= 0 is 60; equal sums tie to the lower id.
	got = Fuse(0, []Hit{{ID: 9}, {ID: 4}}, []Hit{{ID: 4}, {ID: 9}})
	if s := 1.0/61 + 1.0/62; len(got) != 2 || got[0].ID != 4 || got[1].ID != 9 || math.Abs(got[0].Score-s) > 1e-12 {
		t.Errorf("Fuse(0) = %v, want 4 then 9, both %v", got, s)
	}
	if got := Fuse(60); len(got) != 0 {
		t.Errorf("Fuse of nothing = %v", got)
	}
}
