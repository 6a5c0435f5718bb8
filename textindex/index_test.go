package textindex

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// scores maps Score's hits by id, failing on a duplicate.
func scores(t *testing.T, ix *Index, query []string) map[DocID]float64 {
	t.Helper()
	m := map[DocID]float64{}
	for _, h := range ix.Score(query) {
		if _, dup := m[h.ID]; dup {
			t.Fatalf("Score(%q) returned %d twice", query, h.ID)
		}
		m[h.ID] = h.Score
	}
	return m
}

// ranking is Score's ids best first.
func ranking(ix *Index, query []string) []DocID {
	hits := ix.Score(query)
	hits = Top(hits, len(hits))
	ids := make([]DocID, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	return ids
}

func addAll(ix *Index, docs ...[]string) {
	for _, d := range docs {
		ix.Add(d)
	}
}

func TestAddHandsOutDenseIDs(t *testing.T) {
	ix := New(Params{})
	for want := range DocID(5) {
		if got := ix.Add([]string{"x"}); got != want {
			t.Fatalf("Add returned %d, want %d", got, want)
		}
	}
	ix.Remove(4)
	if got := ix.Add(nil); got != 5 {
		t.Errorf("Add after Remove returned %d, want 5: ids are never reused", got)
	}
	if got := ix.Len(); got != 5 {
		t.Errorf("Len = %d, want 5", got)
	}
}

func TestScoreByHand(t *testing.T) {
	ix := New(Params{})
	addAll(ix, []string{"cat"}, []string{"dog", "dog", "bird"})
	// N = 2, n(cat) = 1: idf = ln(1 + 1.5/1.5) = ln 2. avgdl = 2, dl = 1:
	// tf part = 1·2.2 / (1 + 1.2·(0.25 + 0.75·1/2)) = 2.2/1.75.
	want := math.Ln2 * 2.2 / 1.75
	got := scores(t, ix, []string{"cat"})
	if len(got) != 1 || math.Abs(got[0]-want) > 1e-12 {
		t.Fatalf("Score(cat) = %v, want {0: %v}", got, want)
	}
	// dog: n = 1, tf = 2, dl = 3: 2·2.2 / (2 + 1.2·(0.25 + 0.75·3/2)).
	want = math.Ln2 * 4.4 / (2 + 1.2*1.375)
	if got := scores(t, ix, []string{"dog"}); math.Abs(got[1]-want) > 1e-12 {
		t.Errorf("Score(dog) = %v, want {1: %v}", got, want)
	}
}

func TestScoreRarerTermRanksHigher(t *testing.T) {
	ix := New(Params{})
	addAll(ix,
		[]string{"apple", "one"},
		[]string{"cherry", "two"},
		[]string{"apple", "three"},
		[]string{"four", "five"},
	)
	// apple is in two documents, cherry in one: cherry weighs more.
	if got, want := ranking(ix, []string{"apple", "cherry"}), []DocID{1, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("ranking = %v, want %v", got, want)
	}
}

func TestScoreLongerDocumentRanksLower(t *testing.T) {
	docs := [][]string{
		{"cat", "a", "b", "c", "d", "e"},
		{"cat", "f"},
		{"g", "h"},
	}
	ix := New(Params{})
	addAll(ix, docs...)
	if got, want := ranking(ix, []string{"cat"}), []DocID{1, 0}; !slices.Equal(got, want) {
		t.Errorf("ranking = %v, want %v: same tf, the shorter document first", got, want)
	}

	flat := New(Params{B: NoLengthNorm})
	addAll(flat, docs...)
	s := scores(t, flat, []string{"cat"})
	if len(s) != 2 || s[0] != s[1] {
		t.Errorf("b = 0: scores %v, want two equal scores", s)
	}
	// With b = 0 the score is idf·tf·(k1+1)/(tf+k1): n = 2 of N = 3.
	if want := math.Log(1+1.5/2.5) * 2.2 / 2.2; math.Abs(s[0]-want) > 1e-12 {
		t.Errorf("b = 0: score %v, want %v", s[0], want)
	}
}

func TestScoreSaturatesTermFrequency(t *testing.T) {
	ix := New(Params{})
	addAll(ix, []string{"dog", "dog"}, []string{"dog", "cat"}, []string{"x", "y"})
	s := scores(t, ix, []string{"dog"})
	if !(s[0] > s[1] && s[0] < 2*s[1]) {
		t.Errorf("tf 2 scores %v against tf 1 %v; want more, but less than twice", s[0], s[1])
	}
}

func TestScoreQueryTerms(t *testing.T) {
	ix := New(Params{})
	addAll(ix, []string{"cat", "dog"}, []string{"bird"})
	once := scores(t, ix, []string{"cat"})
	twice := scores(t, ix, []string{"cat", "nosuchterm", "cat"})
	if len(twice) != 1 || math.Abs(twice[0]-2*once[0]) > 1e-12 {
		t.Errorf("a term given twice: %v, want twice %v", twice, once)
	}
	if got := ix.Score([]string{"nosuchterm"}); got != nil {
		t.Errorf("unknown term: %v, want nil", got)
	}
	if got := ix.Score(nil); got != nil {
		t.Errorf("empty query: %v, want nil", got)
	}
	if got := New(Params{}).Score([]string{"cat"}); got != nil {
		t.Errorf("empty index: %v, want nil", got)
	}
}

func TestParams(t *testing.T) {
	cases := []struct {
		in    Params
		k1, b float64
	}{
		{Params{}, 1.2, 0.75},
		{Params{K1: 2, B: 0.5}, 2, 0.5},
		{Params{K1: -1, B: NoLengthNorm}, 1.2, 0},
		{Params{K1: math.NaN(), B: math.NaN()}, 1.2, 0.75},
		{Params{K1: math.Inf(1), B: 3}, 1.2, 1},
	}
	for _, c := range cases {
		ix := New(c.in)
		if ix.k1 != c.k1 || ix.b != c.b {
			t.Errorf("New(%+v): k1 %v b %v, want %v %v", c.in, ix.k1, ix.b, c.k1, c.b)
		}
	}
}

// corpus makes n documents over a vocabulary of v words with a skew, so that
// some posting lists are long and some short.
func corpus(rng *rand.Rand, n, v int) [][]string {
	docs := make([][]string, n)
	for i := range docs {
		doc := make([]string, 1+rng.IntN(12))
		for j := range doc {
			doc[j] = fmt.Sprintf("w%d", int(float64(v)*math.Pow(rng.Float64(), 3)))
		}
		docs[i] = doc
	}
	return docs
}

// reference scores query over the live docs by the textbook formula, with
// nothing shared with Index.
func reference(docs [][]string, dead map[DocID]bool, p Params, query []string) map[DocID]float64 {
	k1, b := 1.2, 0.75
	if p.K1 > 0 {
		k1 = p.K1
	}
	if p.B < 0 {
		b = 0
	} else if p.B > 0 {
		b = p.B
	}
	var n, total float64
	df := map[string]float64{}
	for id, d := range docs {
		if dead[DocID(id)] {
			continue
		}
		n++
		total += float64(len(d))
		seen := map[string]bool{}
		for _, t := range d {
			if !seen[t] {
				seen[t] = true
				df[t]++
			}
		}
	}
	out := map[DocID]float64{}
	for id, d := range docs {
		if dead[DocID(id)] {
			continue
		}
		var s float64
		matched := false
		for _, q := range query {
			tf := float64(slices.Index(d, q) + 1)
			if tf == 0 {
				continue
			}
			tf = 0
			for _, t := range d {
				if t == q {
					tf++
				}
			}
			matched = true
			idf := math.Log(1 + (n-df[q]+0.5)/(df[q]+0.5))
			s += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(len(d))/(total/n)))
		}
		if matched {
			out[DocID(id)] = s
		}
	}
	return out
}

func sameScores(t *testing.T, what string, got, want map[DocID]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, want %d", what, len(got), len(want))
	}
	for id, w := range want {
		g, ok := got[id]
		if !ok || math.Abs(g-w) > 1e-9 {
			t.Fatalf("%s: doc %d scores %v (present %v), want %v", what, id, g, ok, w)
		}
	}
}

func queries(rng *rand.Rand, n, v int) [][]string {
	qs := make([][]string, n)
	for i := range qs {
		q := make([]string, 1+rng.IntN(6))
		for j := range q {
			q[j] = fmt.Sprintf("w%d", rng.IntN(v+3)) // a few unknown terms
		}
		qs[i] = q
	}
	return qs
}

func TestScoreMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	docs := corpus(rng, 300, 60)
	for _, p := range []Params{{}, {K1: 2, B: 0.3}, {B: NoLengthNorm}} {
		ix := New(p)
		addAll(ix, docs...)
		for _, q := range queries(rng, 50, 60) {
			sameScores(t, fmt.Sprintf("%+v %q", p, q), scores(t, ix, q), reference(docs, nil, p, q))
		}
	}
}

// fresh indexes the live docs anew and scores query there, reporting the
// scores under the ids of the index they came from.
func fresh(docs [][]string, dead map[DocID]bool, query []string) map[DocID]float64 {
	ix := New(Params{})
	var orig []DocID
	for id, d := range docs {
		if !dead[DocID(id)] {
			ix.Add(d)
			orig = append(orig, DocID(id))
		}
	}
	out := map[DocID]float64{}
	for _, h := range ix.Score(query) {
		out[orig[h.ID]] = h.Score
	}
	return out
}

func TestRemove(t *testing.T) {
	ix := New(Params{})
	addAll(ix, []string{"cat", "dog"}, []string{"cat"}, []string{"dog", "bird", "fish"})
	ix.Remove(1)
	ix.Remove(1)
	ix.Remove(99)
	if got := ix.Len(); got != 2 {
		t.Fatalf("Len = %d, want 2", got)
	}
	docs := [][]string{{"cat", "dog"}, {"cat"}, {"dog", "bird", "fish"}}
	dead := map[DocID]bool{1: true}
	for _, q := range [][]string{{"cat"}, {"dog"}, {"cat", "dog", "bird"}} {
		got := scores(t, ix, q)
		if _, ok := got[1]; ok {
			t.Errorf("Score(%q) returned the removed document", q)
		}
		// Fresh has N = 2 and avgdl = 2.5: only equal if both adjusted.
		sameScores(t, fmt.Sprintf("%q", q), got, fresh(docs, dead, q))
	}
	ix.Remove(0)
	ix.Remove(2)
	if got := ix.Score([]string{"cat", "dog"}); got != nil {
		t.Errorf("all removed: Score = %v, want nil", got)
	}
	if ix.Len() != 0 {
		t.Errorf("all removed: Len = %d", ix.Len())
	}
}

// TestRemoveCompaction checks scores against a fresh index at each stage of
// a list's life: dead entries skipped, the list compacted by a query, every
// list swept once a quarter of the index is dead.
func TestRemoveCompaction(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const v = 40
	docs := corpus(rng, 400, v)
	ix := New(Params{})
	addAll(ix, docs...)
	qs := queries(rng, 40, v)
	dead := map[DocID]bool{}
	check := func(stage string) []map[DocID]float64 {
		t.Helper()
		var all []map[DocID]float64
		for _, q := range qs {
			got := scores(t, ix, q)
			sameScores(t, stage+fmt.Sprintf(" %q", q), got, fresh(docs, dead, q))
			all = append(all, got)
		}
		return all
	}
	entries := func() (n int) {
		for i := range ix.lists {
			n += len(ix.lists[i].docs)
		}
		return n
	}

	// Stage 1: every document holding w7 goes, and some others; below a
	// quarter of the index, so nothing is swept.
	for id, d := range docs {
		if slices.Contains(d, "w7") || rng.IntN(20) == 0 {
			ix.Remove(DocID(id))
			dead[DocID(id)] = true
		}
	}
	if len(dead)*4 > len(docs) {
		t.Fatalf("test setup: %d of %d removed, meant to stay under a quarter", len(dead), len(docs))
	}
	before := entries()
	w7 := &ix.lists[ix.termID["w7"]]
	if len(w7.docs) == 0 {
		t.Fatal("test setup: w7's list is already empty")
	}
	skipped := check("dead entries skipped")
	if len(w7.docs) != 0 {
		t.Errorf("w7's list, all dead, still holds %d entries after a query met it", len(w7.docs))
	}
	if after := entries(); after >= before {
		t.Errorf("postings hold %d entries after queries, %d before: nothing compacted", after, before)
	}
	compacted := check("after a query's compaction")
	for i := range skipped {
		sameScores(t, "before against after compaction", compacted[i], skipped[i])
	}

	// Stage 2: past a quarter dead, Remove sweeps every list.
	for id := range docs {
		if !dead[DocID(id)] && len(dead)*4 <= len(docs) {
			ix.Remove(DocID(id))
			dead[DocID(id)] = true
		}
	}
	if ix.unswept != 0 {
		t.Errorf("%d removed documents unswept after passing a quarter", ix.unswept)
	}
	for i := range ix.lists {
		for _, d := range ix.lists[i].docs {
			if dead[d] {
				t.Fatalf("dead document %d still in a list after the sweep", d)
			}
		}
	}
	check("after the sweep")
}

func TestRemoveEpochWrap(t *testing.T) {
	docs := [][]string{{"a1", "b1"}, {"a1"}, {"b1", "c1"}, {"a1", "c1"}, {"c1"}, {"d1"}, {"a1", "d1"}, {"b1"}, {"c1", "d1"}}
	ix := New(Params{})
	addAll(ix, docs...)
	ix.Score([]string{"a1", "b1", "c1", "d1"}) // cache the live counts at this epoch
	ix.epoch = math.MaxUint32 - 1
	ix.Remove(0)
	ix.Remove(1) // wraps the epoch to 0, when the counts were cached
	if ix.epoch != 0 {
		t.Fatalf("test setup: epoch %d, want it wrapped to 0", ix.epoch)
	}
	dead := map[DocID]bool{0: true, 1: true}
	for _, q := range [][]string{{"a1"}, {"b1"}, {"c1", "d1"}} {
		sameScores(t, fmt.Sprintf("%q", q), scores(t, ix, q), fresh(docs, dead, q))
	}
}

// TestAddRemoveModel interleaves adds, removes and queries at random and
// checks every query against the textbook formula.
func TestAddRemoveModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const v = 30
	pool := corpus(rng, 2000, v)
	ix := New(Params{})
	var docs [][]string
	dead := map[DocID]bool{}
	for step := range 3000 {
		switch r := rng.IntN(10); {
		case r < 5 || len(docs) == 0:
			d := pool[step%len(pool)]
			if id := ix.Add(d); int(id) != len(docs) {
				t.Fatalf("Add returned %d, want %d", id, len(docs))
			}
			docs = append(docs, d)
		case r < 8:
			id := DocID(rng.IntN(len(docs)))
			ix.Remove(id)
			dead[id] = true
		default:
			q := queries(rng, 1, v)[0]
			sameScores(t, fmt.Sprintf("step %d %q", step, q), scores(t, ix, q), reference(docs, dead, Params{}, q))
		}
		if want := len(docs) - len(dead); ix.Len() != want {
			t.Fatalf("step %d: Len = %d, want %d", step, ix.Len(), want)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const v = 50
	pool := corpus(rng, 3000, v)
	qs := queries(rng, 100, v)
	ix := New(Params{})

	var (
		mu      sync.Mutex
		docs    = make([][]string, len(pool)) // by DocID
		added   []DocID
		removed []DocID // in order of Remove returning
		wg      sync.WaitGroup
		failed  = make(chan string, 1)
	)
	fail := func(msg string) {
		select {
		case failed <- msg:
		default:
		}
	}
	done := make(chan struct{})
	for w := range 2 {
		wg.Go(func() {
			for i := w; i < len(pool); i += 2 {
				id := ix.Add(pool[i])
				mu.Lock()
				docs[id] = pool[i]
				added = append(added, id)
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		r := rand.New(rand.NewPCG(9, 10))
		for range 1500 {
			mu.Lock()
			if len(added) == 0 {
				mu.Unlock()
				continue
			}
			i := r.IntN(len(added))
			id := added[i]
			added = slices.Delete(added, i, i+1)
			mu.Unlock()
			ix.Remove(id)
			mu.Lock()
			removed = append(removed, id)
			mu.Unlock()
		}
	})
	var scorers sync.WaitGroup
	for s := range 3 {
		scorers.Go(func() {
			for i := s; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				mu.Lock()
				gone := slices.Clone(removed)
				mu.Unlock()
				for _, h := range ix.Score(qs[i%len(qs)]) {
					if slices.Contains(gone, h.ID) {
						fail(fmt.Sprintf("Score returned %d, removed before it started", h.ID))
					}
					if !(h.Score > 0) {
						fail(fmt.Sprintf("Score returned %v for %d", h.Score, h.ID))
					}
				}
			}
		})
	}
	wg.Wait()
	close(done)
	scorers.Wait()
	select {
	case msg := <-failed:
		t.Fatal(msg)
	default:
	}

	dead := map[DocID]bool{}
	for _, id := range removed {
		dead[id] = true
	}
	if want := len(pool) - len(removed); ix.Len() != want {
		t.Fatalf("Len = %d, want %d", ix.Len(), want)
	}
	for _, q := range qs {
		sameScores(t, fmt.Sprintf("after %q", q), scores(t, ix, q), fresh(docs, dead, q))
	}
}
