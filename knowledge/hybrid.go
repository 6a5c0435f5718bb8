package knowledge

import (
	"math"
	"slices"

	"koe/textindex"
)

// The local store ranks by keywords and vectors together, each weighed by
// how sure it is of the question at hand. Reciprocal-rank fusion, which
// this replaces, counts every list alike whatever its scores say: a chunk
// in the middle of both lists beat the one chunk that held every word of
// the question, and an embedding model that knew nothing of the documents
// (or of the language) still had half the say. Here the keyword ranking
// always counts in full, and the vector ranking only as far as its best
// chunk stands out of the crowd more than the best of as many random
// similarities would: a model whose similarities are noise, or all alike,
// leaves the keyword ranking exactly as it was.

const (
	// vectorSlack is how many standard deviations beyond the noise level
	// (the best of n random similarities) the best chunk must stand out
	// by before vectors count at all; the best of n draws exceeds the
	// level by one deviation in well under one search in a hundred.
	vectorSlack = 1.0
	// vectorSpan is how many further deviations take vectors from no
	// say to as much as keywords.
	vectorSpan = 2.0
	// minSimSpread is the least spread of similarities that is a
	// ranking and not rounding: an endpoint answering one vector for
	// every text gives differences of about 1e-7.
	minSimSpread = 1e-4
	// decisiveRatio is how many times the next chunk's keyword score the
	// first one's must be for it to stay first whatever the vectors say.
	decisiveRatio = 2.0
)

// simStats are the similarities of the question to every row of a
// matrix: their mean, standard deviation and number.
type simStats struct {
	mean, std float64
	n         int
}

func newSimStats(sum, sumSq float64, n int) simStats {
	if n == 0 {
		return simStats{}
	}
	mean := sum / float64(n)
	return simStats{mean: mean, std: math.Sqrt(max(sumSq/float64(n)-mean*mean, 0)), n: n}
}

// vectorWeight is the say of the vector ranking for one question, from 0
// (none: keywords alone) to 1 (as much as keywords), given the best
// chunk's similarity. The best of n similarities drawn at random lies
// about sqrt(2 ln n) deviations above their mean; only what the best
// stands out by beyond that (and vectorSlack) is evidence that the model
// tells this question's chunks apart from the rest. Below a dozen chunks
// nothing is: the best can stand out no more than noise would.
func vectorWeight(best float64, st simStats) float64 {
	if st.n < 2 || st.std < minSimSpread {
		return 0
	}
	z := (best - st.mean) / st.std
	floor := math.Sqrt(2*math.Log(float64(st.n))) + vectorSlack
	// One chunk alone at one similarity and all the rest at another is
	// as sure as a model can be, and stands sqrt(n-1) deviations out: in
	// a small knowledge base the full say comes at that.
	span := min(vectorSpan, math.Sqrt(float64(st.n-1))-floor)
	if span <= 0 {
		return 0 // too few chunks to tell a model from noise
	}
	return min(max((z-floor)/span, 0), 1)
}

// hybridLocked ranks the shelf's chunks for the question's terms and its
// unit vector q (compared with the rows of m), and says which of the
// limit hits it returns is the keyword ranking's first (-1: none matched
// a keyword).
//
// A chunk's score is its BM25 score over the best chunk's, plus the
// vector weight times its similarity scaled so that the mean chunk has 0
// and the best 1. Every chunk of either list is scored on both, so one
// near the top of one list and absent from the other's top is not taken
// for a miss. A decisive keyword hit, scoring at least twice the next
// one, keeps the first place whatever the vectors say; the keyword first
// is always returned.
func (s *shelf) hybridLocked(terms []string, m *matrix, q []float32, limit int) ([]textindex.Hit, int) {
	depth := max(3*limit, 30)
	vector, st := s.nearestLocked(m, q, depth)
	scored := s.words.Score(terms)
	var weight float64
	if len(vector) > 0 {
		weight = vectorWeight(vector[0].Score, st)
	}
	if weight == 0 {
		return fillByVector(textindex.Top(scored, limit), vector, limit)
	}

	type both struct{ keyword, vector float64 }
	cand := make(map[textindex.DocID]*both, 2*depth)
	for _, h := range vector {
		cand[h.ID] = &both{vector: h.Score}
	}
	// The keyword scores of the vector list's chunks, before Top
	// reorders (and partly overwrites) scored.
	for _, h := range scored {
		if c := cand[h.ID]; c != nil {
			c.keyword = h.Score
		}
	}
	keyword := textindex.Top(scored, depth)
	for _, h := range keyword {
		if c := cand[h.ID]; c != nil {
			continue
		}
		e := s.entries[h.ID]
		sim := st.mean // no vector of the question's dimension: no evidence either way
		if e.dim == m.dim {
			sim = float64(dot(q, m.data[e.row*m.dim:(e.row+1)*m.dim]))
		}
		cand[h.ID] = &both{keyword: h.Score, vector: sim}
	}

	var keywordTop float64
	decisive := false
	if len(keyword) > 0 {
		keywordTop = keyword[0].Score
		decisive = len(keyword) == 1 || keyword[0].Score >= decisiveRatio*keyword[1].Score
	}
	spread := vector[0].Score - st.mean // > 0: the weight is
	out := make([]textindex.Hit, 0, len(cand))
	for id, c := range cand {
		score := weight * min(max((c.vector-st.mean)/spread, 0), 1)
		if keywordTop > 0 {
			score += c.keyword / keywordTop
		}
		if decisive && id == keyword[0].ID {
			score = 2 + weight // above the most any other can have, 1 + weight
		}
		out = append(out, textindex.Hit{ID: id, Score: score})
	}
	ranked := textindex.Top(out, limit)
	if len(keyword) == 0 {
		return ranked, -1
	}
	first := keyword[0].ID
	if at := slices.IndexFunc(ranked, func(h textindex.Hit) bool { return h.ID == first }); at >= 0 {
		return ranked, at
	}
	// Never bury the chunk that holds the question's words best: it
	// takes the last place rather than none.
	ranked[len(ranked)-1] = textindex.Hit{ID: first, Score: ranked[len(ranked)-1].Score}
	return ranked, len(ranked) - 1
}

// fillByVector is the keyword ranking, and after it, in the places it
// leaves empty, the chunks nearest the question that it lacks: where
// keywords have nothing to say, the model's ranking is the only one,
// and it displaces no keyword hit. It says which hit is the keyword
// first (-1: none).
func fillByVector(keyword, vector []textindex.Hit, limit int) ([]textindex.Hit, int) {
	best := -1
	if len(keyword) > 0 {
		best = 0
	}
	if len(keyword) >= limit || len(vector) == 0 {
		return keyword, best
	}
	out := keyword
	floor := 0.0 // the extra places rank below every keyword hit
	if len(keyword) > 0 {
		floor = keyword[len(keyword)-1].Score
	}
	for _, h := range vector {
		if len(out) == limit {
			break
		}
		if slices.ContainsFunc(keyword, func(k textindex.Hit) bool { return k.ID == h.ID }) {
			continue
		}
		floor = math.Nextafter(floor, math.Inf(-1))
		out = append(out, textindex.Hit{ID: h.ID, Score: floor})
	}
	return out, best
}
