package knowledge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/textindex"
)

// kumoAnswer is the sentence that answers both wordings of kumoQuestions.
const kumoAnswer = "It was bought in 1998 with a grant from the prefecture"

// kumoQuestions are the two wordings of the question: a long one,
// and a short one that held too few keywords for the router once vectors
// had put another chunk first.
var kumoQuestions = []string{
	"Which telescope does the Kumo Dome observatory use, and when was it bought?",
	"What telescope does Kumo Dome use?",
}

// observatoryService opens a service over a real bbolt file with idx and
// emb, holding the observatory's handbook and a bakery's notes, cut into
// small chunks so that the handbook is searched, never read whole.
func observatoryService(t *testing.T, idx Index, emb Embedder) *Service {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ChunkTokens, cfg.ChunkOverlap = 128, 0
	s := evalServiceWith(t, idx, emb, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"kumo-dome.md", "bakery.md"} {
		data, err := os.ReadFile(filepath.Join("testdata", "observatory", name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Add(ctx, evalConf, Upload{Name: name, Mime: "text/markdown", Data: data}, evalCount, nil); err != nil {
			t.Fatalf("add %s: %v", name, err)
		}
	}
	return s
}

// evalServiceWith opens an empty service over a real bbolt file with cfg.
func evalServiceWith(t testing.TB, idx Index, emb Embedder, cfg Config) *Service {
	t.Helper()
	st := openStore(t, filepath.Join(t.TempDir(), "koe.db"))
	s := New(Options{Config: cfg, Docs: st, Index: idx, Embedder: emb, Count: evalCount})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		_ = idx.Close()
		_ = st.Close()
	})
	return s
}

// kumoRead is what the auto router gives a turn for question at a budget
// of about five of the handbook's chunks, and where the answer lies in it
// (-1: not there).
func kumoRead(t *testing.T, s *Service, question string) (Result, int) {
	t.Helper()
	res, err := s.Read(context.Background(), Query{ConfUID: evalConf, Text: question, InputBudget: 400, Budget: 500, Mode: Auto})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Searched {
		t.Fatalf("%q was not searched: the documents must be too large to read whole", question)
	}
	for i, p := range res.Passages {
		if strings.Contains(normalizeSpace(p.Text), kumoAnswer) {
			return res, i
		}
	}
	return res, -1
}

// A clear keyword hit stays first, and the auto router reads it, whatever
// the embedding model: one that knows nothing, one that answers the same
// vector for everything, and one that only knows which document a text is
// about (every chunk of the handbook looks alike to it). The memory store,
// which ranks by keywords alone, answers the same.
func TestHybridKeepsKeywordHit(t *testing.T) {
	models := []struct {
		name  string
		model func(string) []float32
	}{
		{"unrelated", unrelatedVector},
		{"constant", constantVector},
		{"topic", topicVector("kumo")},
	}
	memory := observatoryService(t, NewMemoryIndex(), nil)
	for _, q := range kumoQuestions {
		res, at := kumoRead(t, memory, q)
		if at != 0 {
			t.Fatalf("memory store, %q: the answer is at %d of %d passages (match %.2f), want first", q, at, len(res.Passages), res.Match)
		}
	}
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			x, _, _ := openLocal(t)
			s := observatoryService(t, x, serveEmbeddings(t, m.model))
			for _, q := range kumoQuestions {
				res, at := kumoRead(t, s, q)
				if !res.Vectors {
					t.Fatalf("%q: vectors took no part: the test would prove nothing", q)
				}
				if len(res.Passages) == 0 {
					t.Errorf("%q: the auto router read nothing (match %.2f, %d keywords)", q, res.Match, res.Matched)
					continue
				}
				if at != 0 {
					var got []string
					for _, p := range res.Passages {
						got = append(got, p.Heading)
					}
					t.Errorf("%q: the answer is at %d of the passages read (%s), want first", q, at, strings.Join(got, " | "))
				}
			}
		})
	}
}

func TestVectorWeight(t *testing.T) {
	for _, tc := range []struct {
		name string
		best float64
		st   simStats
		want func(float64) bool
	}{
		{"one vector for every text", 1, simStats{mean: 1 - 1e-7, std: 3e-8, n: 1000}, func(w float64) bool { return w == 0 }},
		{"a single chunk", 0.9, simStats{mean: 0.9, std: 0, n: 1}, func(w float64) bool { return w == 0 }},
		// sqrt(2 ln 1000) = 3.72: the best of a thousand random draws.
		{"the best of noise", 0.1 + 3.72*0.05, simStats{mean: 0.1, std: 0.05, n: 1000}, func(w float64) bool { return w == 0 }},
		{"a little beyond noise", 0.1 + 5.2*0.05, simStats{mean: 0.1, std: 0.05, n: 1000}, func(w float64) bool { return w > 0 && w < 0.5 }},
		{"far out", 0.1 + 8*0.05, simStats{mean: 0.1, std: 0.05, n: 1000}, func(w float64) bool { return w == 1 }},
	} {
		if w := vectorWeight(tc.best, tc.st); !tc.want(w) {
			t.Errorf("%s: weight %.3f", tc.name, w)
		}
	}
}

// hybridCatalog is a local store's catalog holding n filler chunks with
// random vectors, plus the chunks given, under conf "c".
func hybridCatalog(t *testing.T, n int, extra ...Chunk) *catalog {
	t.Helper()
	cat := newCatalog(true)
	var fill []Chunk
	for i := range n {
		fill = append(fill, Chunk{Seq: i, Text: fmt.Sprintf("filler paragraph %d about the weather", i), Tokens: 8,
			Vector: randomVector(hashSeed(fmt.Sprint("filler", i)))})
	}
	for _, doc := range []struct {
		id     string
		chunks []Chunk
	}{{"filler", fill}, {"extra", extra}} {
		ps, err := cat.prepare(doc.id, doc.chunks)
		if err != nil {
			t.Fatal(err)
		}
		cat.put("c", doc.id, ps)
	}
	return cat
}

// When the model is sure, vectors count: a chunk without one of the
// question's words but with its meaning comes in. When it is sure of
// another chunk, a keyword hit that scores twice the next one still
// stays first.
func TestHybridWeighing(t *testing.T) {
	q := randomVector(hashSeed("question"))
	near := func(scale float32) []float32 {
		v := randomVector(hashSeed(fmt.Sprint("near", scale)))
		for i := range v {
			v[i] = q[i] + scale*v[i]
		}
		return v
	}
	cat := hybridCatalog(t, 300,
		Chunk{Seq: 0, Text: "The reflector was purchased in 1998.", Tokens: 6, Vector: near(0.1)},
		Chunk{Seq: 1, Text: "Which telescope? The telescope was bought in 1998; the telescope is a reflector.", Tokens: 14, Vector: randomVector(hashSeed("far"))},
		Chunk{Seq: 2, Text: "Bring your own telescope on public nights.", Tokens: 7, Vector: near(0.3)},
	)
	hits, err := cat.search("c", SearchQuery{Text: "which telescope was bought", Vector: q, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hits {
		got = append(got, fmt.Sprintf("%s/%d", h.DocID, h.Seq))
	}
	if strings.Join(got, " ") != "extra/1 extra/0 extra/2" && strings.Join(got, " ") != "extra/1 extra/2 extra/0" {
		t.Fatalf("hits %v: want the keyword hit first, then the two chunks near the question", got)
	}
	if !hits[0].KeywordBest {
		t.Fatalf("the keyword ranking's first is not marked: %+v", hits[0])
	}
}

// A matrix's rows move when removed chunks are compacted away: every
// chunk must still find its own vector by its row, since the hybrid
// search reads the similarity of keyword hits through it.
func TestHybridRowsAfterCompaction(t *testing.T) {
	cat := newCatalog(true)
	for d := range 6 {
		var chunks []Chunk
		for i := range 5 {
			chunks = append(chunks, Chunk{Seq: i, Text: fmt.Sprintf("doc %d chunk %d", d, i), Vector: randomVector(hashSeed(fmt.Sprintf("doc%d/%d", d, i)))})
		}
		ps, err := cat.prepare(fmt.Sprint("doc", d), chunks)
		if err != nil {
			t.Fatal(err)
		}
		cat.put("c", fmt.Sprint("doc", d), ps)
	}
	for _, d := range []int{0, 2, 3, 5} { // past half: at least one compaction
		cat.delete("c", fmt.Sprint("doc", d))
	}
	s := cat.shelves["c"]
	m := s.matrices[hybridDim]
	if len(m.ids) == 30 {
		t.Fatal("no compaction happened: the test proves nothing")
	}
	for id, e := range s.entries {
		if e == nil {
			continue
		}
		want, err := unit(randomVector(hashSeed(fmt.Sprintf("%s/%d", e.chunk.DocID, e.chunk.Seq))))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.data[e.row*m.dim : (e.row+1)*m.dim]; !slices.Equal(got, want) || m.ids[e.row] != textindex.DocID(id) {
			t.Fatalf("chunk %s/%d: row %d holds another vector", e.chunk.DocID, e.chunk.Seq, e.row)
		}
	}
}
