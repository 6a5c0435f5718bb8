package textindex

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// zipfText writes like a conversation log: words drawn from a Zipf
// distribution over a vocabulary whose most frequent ranks are the stop
// words (as in English, where function words top the counts) and whose
// remaining ranks, up to 20k, are made-up content words.
type zipfText struct {
	zipf  *rand.Zipf
	rng   *rand.Rand
	words []string // by rank
	terms []string // Terms of each word, "" for a stop word
}

func newZipfText(seed uint64) *zipfText {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	const vocab = 20000
	words := make([]string, 0, vocab)
	for w := range stopWords {
		words = append(words, w)
	}
	slices.Sort(words) // map order must not change the corpus
	seen := map[string]bool{}
	for _, w := range words {
		seen[w] = true
	}
	for len(words) < vocab {
		b := make([]byte, 3+rng.IntN(8))
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		if w := string(b); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	z := &zipfText{
		zipf:  rand.NewZipf(rng, 1.07, 2, vocab-1),
		rng:   rng,
		words: words,
		terms: make([]string, vocab),
	}
	for i, w := range words {
		if t := Terms(w); len(t) == 1 {
			z.terms[i] = t[0]
		}
	}
	return z
}

// text is n words of prose.
func (z *zipfText) text(n int) string {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(z.words[z.zipf.Uint64()])
	}
	return sb.String()
}

// doc is the terms of n words, as Terms(z.text(n)) would give them, without
// running the stemmer over millions of words.
func (z *zipfText) doc(n int) []string {
	out := make([]string, 0, n)
	for range n {
		if t := z.terms[z.zipf.Uint64()]; t != "" {
			out = append(out, t)
		}
	}
	return out
}

// query is n terms: a question of 8-12 content words is longer than most,
// so a fair test of Score.
func (z *zipfText) query(n int) []string {
	out := make([]string, 0, n)
	for len(out) < n {
		if t := z.terms[z.zipf.Uint64()]; t != "" {
			out = append(out, t)
		}
	}
	return out
}

func (z *zipfText) docs(n, minWords, maxWords int) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = z.doc(minWords + z.rng.IntN(maxWords-minWords+1))
	}
	return out
}

func BenchmarkTerms(b *testing.B) {
	z := newZipfText(1)
	texts := make([]string, 1000)
	for i := range texts {
		texts[i] = z.text(25)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		Terms(texts[i%len(texts)])
		i++
	}
}

// BenchmarkAdd is the cost of indexing one document of 25 words, in an index
// that keeps growing.
func BenchmarkAdd(b *testing.B) {
	docs := newZipfText(2).docs(10000, 25, 25)
	ix := New(Params{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ix.Add(docs[i%len(docs)])
		i++
	}
}

// scoreCorpus is an index of n documents of 10-40 words and queries of 8-12
// terms over the same vocabulary.
func scoreCorpus(n int) (*Index, [][]string) {
	z := newZipfText(3)
	ix := New(Params{})
	for _, d := range z.docs(n, 10, 40) {
		ix.Add(d)
	}
	qs := make([][]string, 1000)
	for i := range qs {
		qs[i] = z.query(8 + z.rng.IntN(5))
	}
	return ix, qs
}

func BenchmarkScore(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		ix, qs := scoreCorpus(n)
		var terms, hits int
		for _, q := range qs {
			terms += len(q)
			hits += len(ix.Score(q))
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ix.Score(qs[i%len(qs)])
				i++
			}
			b.ReportMetric(float64(terms)/float64(len(qs)), "terms/query")
			b.ReportMetric(float64(hits)/float64(len(qs)), "hits/query")
		})
		b.Run(fmt.Sprint(n, "/top10"), func(b *testing.B) {
			i := 0
			for b.Loop() {
				Top(ix.Score(qs[i%len(qs)]), 10)
				i++
			}
		})
	}

	// The worst query there is: the ten commonest terms, the longest lists.
	ix, qs := scoreCorpus(100_000)
	common := make([]string, 0, len(ix.termID))
	for t := range ix.termID {
		common = append(common, t)
	}
	slices.SortFunc(common, func(a, b string) int {
		return len(ix.lists[ix.termID[b]].docs) - len(ix.lists[ix.termID[a]].docs)
	})
	common = common[:10]
	b.Run("100000/commonest", func(b *testing.B) {
		for b.Loop() {
			ix.Score(common)
		}
		b.ReportMetric(float64(len(ix.Score(common))), "hits/query")
	})

	// A tenth of the documents removed, not yet swept: lists are walked
	// with a look at the dead bitmap.
	rng := rand.New(rand.NewPCG(5, 6))
	for id := range DocID(100_000) {
		if rng.IntN(10) == 0 {
			ix.Remove(id)
		}
	}
	b.Run("100000/tenth-removed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			ix.Score(qs[i%len(qs)])
			i++
		}
	})
}

// scoreMap is Score with a map for accumulator, kept to measure the choice
// of a dense one.
func (ix *Index) scoreMap(query []string) []Hit {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	terms := ix.lookup(query, make([]queryTerm, 0, 16))
	n := float64(ix.live)
	avgdl := float64(ix.liveLen) / n
	base, slope := ix.k1*(1-ix.b), ix.k1*ix.b/avgdl
	acc := map[DocID]float64{}
	for _, qt := range terms {
		p := &ix.lists[qt.tid]
		df := ix.liveCount(p)
		if df == 0 {
			continue
		}
		w := qt.times * math.Log(1+(n-float64(df)+0.5)/(float64(df)+0.5)) * (ix.k1 + 1)
		clean := df == len(p.docs)
		for i, d := range p.docs {
			if !clean && ix.isDead(d) {
				continue
			}
			tf := float64(p.tfs[i])
			acc[d] += w * tf / (tf + base + slope*float64(ix.docLen[d]))
		}
	}
	hits := make([]Hit, 0, len(acc))
	for d, s := range acc {
		hits = append(hits, Hit{d, s})
	}
	return hits
}

func TestScoreMapAgrees(t *testing.T) {
	ix, qs := scoreCorpus(2000)
	for _, q := range qs[:50] {
		want := map[DocID]float64{}
		for _, h := range ix.scoreMap(q) {
			want[h.ID] = h.Score
		}
		sameScores(t, fmt.Sprintf("%q", q), scores(t, ix, q), want)
	}
}

func BenchmarkAccumulator(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		ix, qs := scoreCorpus(n)
		for _, acc := range []struct {
			name  string
			score func([]string) []Hit
		}{{"dense", ix.Score}, {"map", ix.scoreMap}} {
			b.Run(fmt.Sprint(acc.name, "/", n), func(b *testing.B) {
				i := 0
				for b.Loop() {
					acc.score(qs[i%len(qs)])
					i++
				}
			})
		}
	}
}

// BenchmarkIndexMemory reports the heap an index of 100k documents of 10-40
// words holds, per document. Run with -benchtime=1x: each run builds one.
func BenchmarkIndexMemory(b *testing.B) {
	const n = 100_000
	docs := newZipfText(4).docs(n, 10, 40)
	var words int
	for _, d := range docs {
		words += len(d)
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ix := New(Params{})
		for _, d := range docs {
			ix.Add(d)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/doc")
		b.ReportMetric(float64(words)/n, "terms/doc")
		b.ReportMetric(float64(len(ix.termID)), "distinct-terms")
		runtime.KeepAlive(ix)
	}
}

// BenchmarkTermsProse is the analysis of one stored chunk of real prose,
// the bulk of opening a knowledge index.
func BenchmarkTermsProse(b *testing.B) {
	chunks := proseChunks(b)
	words := 0
	for _, c := range chunks {
		words += len(Words(c))
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			Terms(chunks[i%len(chunks)])
			i++
		}
		b.ReportMetric(float64(words)/float64(len(chunks))*float64(b.N)/b.Elapsed().Seconds(), "words/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				Terms(chunks[i%len(chunks)])
				i++
			}
		})
		b.ReportMetric(float64(words)/float64(len(chunks))*float64(b.N)/b.Elapsed().Seconds(), "words/s")
	})
}
