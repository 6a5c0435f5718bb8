package textindex

import (
	"math"
	"slices"
	"sync"
)

// Hit is a document and its score.
type Hit struct {
	ID    DocID
	Score float64
}

// accumulator is Score's scratch: a dense score per DocID, all zero between
// uses, and the ids it touched, so that resetting costs the hits, not the
// index. Dense beats a map here (see BenchmarkAccumulator): one indexed add
// per posting against a hash and probe. Pooled across indexes, since one
// scratch the size of the largest index serves them all.
type accumulator struct {
	score   []float64
	touched []DocID
}

var accumulators = sync.Pool{New: func() any { return new(accumulator) }}

// queryTerm is a distinct query term present in the index, with how many
// times the query names it.
type queryTerm struct {
	tid   uint32
	times float64
}

// Score returns the BM25 score of every live document matching at least one
// query term, in no particular order. A query term given twice counts twice;
// terms the index has never seen are ignored. IDF is the non-negative form
// log(1 + (N - n + 0.5)/(n + 0.5)) of Lucene and BM25+, so a term in most
// documents still adds a little instead of subtracting.
//
// Score runs under the read lock. When it finds a posting list a quarter
// dead it takes the write lock afterwards, briefly, to compact that list.
func (ix *Index) Score(query []string) []Hit {
	ix.mu.RLock()
	hits, stale := ix.score(query)
	ix.mu.RUnlock()
	if len(stale) > 0 {
		// Compaction rewrites lists readers may be walking: only under
		// the write lock, after this reader has let go of the read lock.
		ix.mu.Lock()
		for _, tid := range stale {
			// Other writers may have been first; and ix.lists may have
			// moved, which is why stale holds term ids, not pointers.
			p := &ix.lists[tid]
			if worthCompacting(p, ix.liveCount(p)) {
				ix.compact(p)
			}
		}
		ix.mu.Unlock()
	}
	return hits
}

// score does Score's work under the read lock; stale lists the terms whose
// postings it found worth compacting.
func (ix *Index) score(query []string) (hits []Hit, stale []uint32) {
	if ix.live == 0 || len(query) == 0 {
		return nil, nil
	}
	terms := ix.lookup(query, make([]queryTerm, 0, 16))
	if ix.related > 0 {
		terms = ix.widen(query, terms)
	}
	if len(terms) == 0 {
		return nil, nil
	}
	acc := accumulators.Get().(*accumulator)
	if len(acc.score) < len(ix.docLen) {
		// Headroom, so that a growing index does not outgrow it per Add.
		acc.score = make([]float64, len(ix.docLen)+len(ix.docLen)/4)
	}
	score, touched := acc.score, acc.touched[:0]

	n := float64(ix.live)
	avgdl := float64(ix.liveLen) / n
	if avgdl == 0 {
		avgdl = 1 // only empty documents live: none can match anyway
	}
	k1 := ix.k1
	// k1·(1 - b + b·dl/avgdl) as base + slope·dl: one multiply-add per posting.
	base, slope := k1*(1-ix.b), k1*ix.b/avgdl
	for _, qt := range terms {
		p := &ix.lists[qt.tid]
		df := ix.liveCount(p)
		if df < len(p.docs) && worthCompacting(p, df) {
			stale = append(stale, qt.tid)
		}
		if df == 0 {
			continue
		}
		idf := qt.times * math.Log(1+(n-float64(df)+0.5)/(float64(df)+0.5))
		w := idf * (k1 + 1)
		clean := df == len(p.docs)
		tfs := p.tfs[:len(p.docs)]
		for i, d := range p.docs {
			if !clean && ix.isDead(d) {
				continue
			}
			tf := float64(tfs[i])
			s := w * tf / (tf + base + slope*float64(ix.docLen[d]))
			if score[d] == 0 { // every contribution is > 0
				touched = append(touched, d)
			}
			score[d] += s
		}
	}

	if len(touched) > 0 {
		hits = make([]Hit, len(touched))
	}
	for i, d := range touched {
		hits[i] = Hit{ID: d, Score: score[d]}
		score[d] = 0
	}
	acc.touched = touched[:0]
	accumulators.Put(acc)
	return hits, stale
}

// lookup resolves query to the distinct known terms' postings, counting
// repeats, into terms.
func (ix *Index) lookup(query []string, terms []queryTerm) []queryTerm {
	for _, t := range query {
		tid, ok := ix.termID[t]
		if !ok {
			continue
		}
		if i := slices.IndexFunc(terms, func(q queryTerm) bool { return q.tid == tid }); i >= 0 {
			terms[i].times++
			continue
		}
		terms = append(terms, queryTerm{tid: tid, times: 1})
	}
	return terms
}

// widen adds to terms, the query's own, the known terms related to the
// query's terms (see related.go), each at its weight; a term related to
// several query terms counts once, at its highest weight, and one the
// query names itself keeps the query's count.
func (ix *Index) widen(query []string, terms []queryTerm) []queryTerm {
	own := len(terms)
	for _, t := range query {
		for _, r := range related[t] {
			tid, ok := ix.termID[r.term]
			if !ok {
				continue
			}
			w := ix.related
			if r.same {
				w = 1
			}
			i := slices.IndexFunc(terms, func(q queryTerm) bool { return q.tid == tid })
			switch {
			case i < 0:
				terms = append(terms, queryTerm{tid: tid, times: w})
			case i >= own && terms[i].times < w:
				terms[i].times = w
			}
		}
	}
	return terms
}
