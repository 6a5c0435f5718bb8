package knowledge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"koe"
	"koe/bolt"
)

func openStore(t testing.TB, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return s
}

// openLocal opens a local index over a fresh bbolt file; the store closes
// at the test's end.
func openLocal(t testing.TB) (*LocalIndex, *bolt.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "koe.db")
	s := openStore(t, path)
	t.Cleanup(func() { _ = s.Close() })
	x, err := OpenLocalIndex(context.Background(), s, nil)
	if err != nil {
		t.Fatalf("OpenLocalIndex: %v", err)
	}
	return x, s, path
}

// eachIndex runs f against both in-process stores.
func eachIndex(t *testing.T, f func(t *testing.T, x Index)) {
	t.Run("memory", func(t *testing.T) { f(t, NewMemoryIndex()) })
	t.Run("local", func(t *testing.T) {
		x, _, _ := openLocal(t)
		f(t, x)
	})
}

func manual(docID string, texts ...string) []Chunk {
	out := make([]Chunk, len(texts))
	for i, text := range texts {
		heading, body, _ := strings.Cut(text, "|")
		out[i] = Chunk{DocID: docID, Seq: i, Name: docID + ".md", Title: "Coffee machine manual", Heading: heading,
			Page: i + 1, Text: body, Tokens: len(strings.Fields(body))}
	}
	return out
}

var coffee = []string{
	"Unpacking|Remove the machine from its box and keep the packaging for transport.",
	"Descaling|Hard water leaves limescale. Run the cleaning cycle twice with the provided solution.",
	"Grinder|Adjust the grind from fine to coarse with the dial behind the bean hopper.",
	"Milk frother|Purge the steam wand after every use so that milk does not dry inside it.",
}

func mustPut(t testing.TB, x Index, conf, docID string, chunks []Chunk) {
	t.Helper()
	if err := x.Put(context.Background(), conf, docID, chunks); err != nil {
		t.Fatalf("Put(%q, %q): %v", conf, docID, err)
	}
}

func search(t testing.TB, x Index, conf string, q SearchQuery) []Hit {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 10
	}
	hits, err := x.Search(context.Background(), conf, q)
	if err != nil {
		t.Fatalf("Search(%q, %q): %v", conf, q.Text, err)
	}
	return hits
}

func texts(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Text
	}
	return out
}

func mustLen(t testing.TB, x Index, conf string, want int) {
	t.Helper()
	n, err := x.Len(context.Background(), conf)
	if err != nil || n != want {
		t.Fatalf("Len(%q) = %d, %v; want %d", conf, n, err, want)
	}
}

func TestPutSearchReplaceDelete(t *testing.T) {
	eachIndex(t, func(t *testing.T, x Index) {
		mustPut(t, x, "c", "coffee", manual("coffee", coffee...))
		mustPut(t, x, "c", "other", manual("other", "Warranty|The warranty covers two years of grinding."))
		mustLen(t, x, "c", 5)

		hits := search(t, x, "c", SearchQuery{Text: "how do I adjust the grind?"})
		if len(hits) == 0 || hits[0].Heading != "Grinder" {
			t.Fatalf("grind query: hits %q, want the Grinder chunk first", texts(hits))
		}
		got := hits[0]
		want := manual("coffee", coffee...)[2]
		if got.Chunk.DocID != "coffee" || got.Seq != 2 || got.Name != want.Name || got.Title != want.Title ||
			got.Page != 3 || got.Tokens != want.Tokens || got.Text != want.Text || got.Vector != nil || got.Score <= 0 {
			t.Fatalf("hit = %+v, want chunk %+v with a positive score and no vector", got, want)
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score {
				t.Fatalf("hits not best first: %+v", hits)
			}
		}
		if hits := search(t, x, "c", SearchQuery{Text: "grind", Limit: 1}); len(hits) != 1 {
			t.Fatalf("Limit 1 gave %d hits", len(hits))
		}

		// Re-ingesting replaces: the old chunks are gone, the new found.
		mustPut(t, x, "c", "coffee", manual("coffee", "Cups|Warm the cups on the tray before brewing."))
		mustLen(t, x, "c", 2)
		if hits := search(t, x, "c", SearchQuery{Text: "limescale descaling"}); len(hits) != 0 {
			t.Fatalf("replaced chunks still found: %q", texts(hits))
		}
		if hits := search(t, x, "c", SearchQuery{Text: "warm cups"}); len(hits) != 1 || hits[0].Heading != "Cups" {
			t.Fatalf("new chunk not found: %q", texts(hits))
		}

		if err := x.Delete(context.Background(), "c", "coffee"); err != nil {
			t.Fatal(err)
		}
		mustLen(t, x, "c", 1)
		if hits := search(t, x, "c", SearchQuery{Text: "warm cups"}); len(hits) != 0 {
			t.Fatalf("deleted chunks still found: %q", texts(hits))
		}
		if err := x.Delete(context.Background(), "c", "never-there"); err != nil {
			t.Fatalf("deleting an unknown document: %v", err)
		}
		// An empty list removes too.
		mustPut(t, x, "c", "other", nil)
		mustLen(t, x, "c", 0)
		if hits := search(t, x, "c", SearchQuery{Text: "warranty"}); len(hits) != 0 {
			t.Fatalf("emptied document still found: %q", texts(hits))
		}
	})
}

func TestConfIsolation(t *testing.T) {
	eachIndex(t, func(t *testing.T, x Index) {
		mustPut(t, x, "barista", "coffee", manual("coffee", coffee...))
		mustPut(t, x, "gardener", "coffee", manual("coffee", "Roses|Prune the roses in early spring."))
		if hits := search(t, x, "gardener", SearchQuery{Text: "descaling limescale"}); len(hits) != 0 {
			t.Fatalf("one character found another's chunks: %q", texts(hits))
		}
		if hits := search(t, x, "barista", SearchQuery{Text: "prune roses"}); len(hits) != 0 {
			t.Fatalf("one character found another's chunks: %q", texts(hits))
		}
		// The same document id under another character is another document.
		if err := x.Delete(context.Background(), "gardener", "coffee"); err != nil {
			t.Fatal(err)
		}
		mustLen(t, x, "barista", len(coffee))
		mustLen(t, x, "gardener", 0)
		if hits := search(t, x, "nobody", SearchQuery{Text: "roses"}); len(hits) != 0 {
			t.Fatalf("a character without knowledge found %q", texts(hits))
		}
	})
}

func TestStemmingHeadingAndTitle(t *testing.T) {
	eachIndex(t, func(t *testing.T, x Index) {
		mustPut(t, x, "c", "coffee", manual("coffee", coffee...))
		// "descaled" meets "Descaling" only through the stemmer, and only
		// in the heading: the chunk's text never says it.
		hits := search(t, x, "c", SearchQuery{Text: "descaled"})
		if len(hits) != 1 || hits[0].Heading != "Descaling" {
			t.Fatalf("stemmed heading query: %q, want the Descaling chunk", texts(hits))
		}
		// First, not only: "purge" is related to "remove", which another
		// chunk says, at a lower weight.
		if hits := search(t, x, "c", SearchQuery{Text: "purging wands"}); len(hits) == 0 || hits[0].Heading != "Milk frother" {
			t.Fatalf("stemmed text query: %q", texts(hits))
		}
		// The title is part of every chunk.
		if hits := search(t, x, "c", SearchQuery{Text: "manual"}); len(hits) != len(coffee) {
			t.Fatalf("title query found %d chunks, want all %d", len(hits), len(coffee))
		}
	})
}

func TestBadInput(t *testing.T) {
	eachIndex(t, func(t *testing.T, x Index) {
		ctx := context.Background()
		mustPut(t, x, "c", "coffee", manual("coffee", coffee...))
		if _, err := x.Search(ctx, "c", SearchQuery{Text: "grind", Limit: 0}); err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("Limit 0: err = %v, want one naming the limit", err)
		}
		repeated := manual("d", "a|one", "b|two")
		repeated[1].Seq = 0
		foreign := manual("d", "a|one")
		foreign[0].DocID = "e"
		for name, chunks := range map[string][]Chunk{"repeated seq": repeated, "foreign doc": foreign} {
			if err := x.Put(ctx, "c", "d", chunks); err == nil {
				t.Errorf("%s: Put succeeded", name)
			}
		}
		if err := x.Put(ctx, "c", "", manual("", "a|one")); err == nil {
			t.Error("empty document id: Put succeeded")
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := x.Put(cancelled, "c", "d", manual("d", "a|one")); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Put: err = %v", err)
		}
		mustLen(t, x, "c", len(coffee))
	})
}

// vec is a vector pointing mostly along axis i of dim dimensions.
func vec(dim, i int) []float32 {
	v := make([]float32, dim)
	for j := range v {
		v[j] = 0.01
	}
	v[i] = 1
	return v
}

func TestHybridLiftsVectorOnlyChunk(t *testing.T) {
	const dim = 64
	chunks := manual("coffee", coffee...)
	// Filler that matches the query's words, to push the answer out of a
	// keyword-only top 3.
	for i := range 6 {
		chunks = append(chunks, Chunk{Seq: len(chunks), Heading: "Cleaning", Text: fmt.Sprintf("Cleaning the machine, note %d: wipe it.", i)})
	}
	// And a crowd the answer's vector can stand out of: vectors count
	// only when the best stands out more than noise would (vectorWeight),
	// which a dozen chunks or fewer cannot show.
	for i := range 30 {
		chunks = append(chunks, Chunk{Seq: len(chunks), Heading: "Spare parts", Text: fmt.Sprintf("Part %d: a gasket.", i)})
	}
	for i := range chunks {
		chunks[i].Vector = vec(dim, i)
	}
	// The answer shares no word with the question: only its vector does.
	answer := 1 // Descaling
	q := SearchQuery{Text: "cleaning the machine", Vector: vec(dim, answer), Limit: 3}
	q.Vector[answer] = 0.9 // not identical: similar

	local, _, _ := openLocal(t)
	mem := NewMemoryIndex()
	for _, x := range []Index{local, mem} {
		mustPut(t, x, "c", "coffee", chunks)
		keywordOnly := search(t, x, "c", SearchQuery{Text: q.Text, Limit: 3})
		if slices.Contains(texts(keywordOnly), chunks[answer].Text) {
			t.Fatalf("the answer is found by keywords alone (%q): the test shows nothing", texts(keywordOnly))
		}
	}
	hits := search(t, local, "c", q)
	if len(hits) != 3 || !slices.Contains(texts(hits), chunks[answer].Text) {
		t.Fatalf("hybrid search: %q, want the descaling chunk among 3", texts(hits))
	}
	if !local.Vectors() || mem.Vectors() {
		t.Fatalf("Vectors(): local %v, memory %v", local.Vectors(), mem.Vectors())
	}
	// The memory store ranks by keywords whatever the query carries.
	if hits := search(t, mem, "c", q); slices.Contains(texts(hits), chunks[answer].Text) {
		t.Fatalf("memory store used a vector: %q", texts(hits))
	}
	// A query vector of another dimension (another model) is not compared:
	// keywords alone rank.
	other := SearchQuery{Text: q.Text, Vector: vec(dim+1, answer), Limit: 3}
	if hits := search(t, local, "c", other); slices.Contains(texts(hits), chunks[answer].Text) {
		t.Fatalf("vectors of another dimension were compared: %q", texts(hits))
	}
}

func TestLocalDimensions(t *testing.T) {
	x, s, _ := openLocal(t)
	ctx := context.Background()
	mixed := manual("d", "a|alpha one", "b|beta two")
	mixed[0].Vector, mixed[1].Vector = vec(64, 0), vec(768, 0)
	if err := x.Put(ctx, "c", "d", mixed); err == nil || !strings.Contains(err.Error(), "dimension") {
		t.Fatalf("mixed dimensions: err = %v, want one naming the dimension", err)
	}
	bad := manual("d", "a|alpha one")
	bad[0].Vector = []float32{1, float32(math.NaN())}
	if err := x.Put(ctx, "c", "d", bad); err == nil {
		t.Fatal("a NaN vector was accepted")
	}
	mustLen(t, x, "c", 0)
	if confs, _ := s.KnowledgeConfs(ctx); len(confs) != 0 {
		t.Fatalf("refused chunks reached the store: %v", confs)
	}

	// Two documents embedded by two models: each query meets its own.
	a := manual("a", "x|apples", "x|apricots")
	a[0].Vector, a[1].Vector = vec(4, 0), vec(4, 1)
	b := manual("b", "x|bananas", "x|blueberries", "x|walnuts")
	b[0].Vector, b[1].Vector = vec(3, 0), vec(3, 1)
	// b[2] has none: it is still found by its words.
	mustPut(t, x, "c", "a", a)
	mustPut(t, x, "c", "b", b)
	if hits := search(t, x, "c", SearchQuery{Vector: vec(3, 1), Limit: 1}); len(hits) != 1 || hits[0].Chunk.DocID != "b" || hits[0].Seq != 1 {
		t.Fatalf("3-dim query: %+v, want b/1", hits)
	}
	if hits := search(t, x, "c", SearchQuery{Vector: vec(4, 1), Limit: 1}); len(hits) != 1 || hits[0].Chunk.DocID != "a" || hits[0].Seq != 1 {
		t.Fatalf("4-dim query: %+v, want a/1", hits)
	}
	if hits := search(t, x, "c", SearchQuery{Text: "walnuts", Limit: 1}); len(hits) != 1 || hits[0].Seq != 2 {
		t.Fatalf("a chunk without a vector is not found by its words: %+v", hits)
	}
}

func TestLocalReopen(t *testing.T) {
	x, s, path := openLocal(t)
	chunks := manual("coffee", coffee...)
	for i := range chunks {
		chunks[i].Vector = vec(8, i)
	}
	mustPut(t, x, "c", "coffee", chunks)
	mustPut(t, x, "c", "gone", manual("gone", "Spare parts|Order gaskets from the dealer."))
	mustPut(t, x, "other", "roses", manual("roses", "Roses|Prune the roses in early spring."))
	if err := x.Delete(context.Background(), "c", "gone"); err != nil {
		t.Fatal(err)
	}
	queries := []SearchQuery{
		{Text: "grind dial", Limit: 10},
		{Text: "steam", Vector: vec(8, 1), Limit: 2},
		{Text: "gaskets", Limit: 10},
	}
	var before [][]Hit
	for _, q := range queries {
		before = append(before, search(t, x, "c", q))
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Search(context.Background(), "c", queries[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("Search after Close: err = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, path)
	defer s.Close()
	y, err := OpenLocalIndex(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	mustLen(t, y, "c", len(coffee))
	mustLen(t, y, "other", 1)
	for i, q := range queries {
		after := search(t, y, "c", q)
		if fmt.Sprint(after) != fmt.Sprint(before[i]) {
			t.Fatalf("query %q after reopen:\n%+v\nwant\n%+v", q.Text, after, before[i])
		}
	}
	if len(before[1]) != 2 || before[1][0].Seq != 3 || before[1][1].Seq != 1 {
		t.Fatalf("hybrid query before reopen: %+v, want the steam chunk, then the vector's", before[1])
	}
	if len(before[2]) != 0 {
		t.Fatalf("deleted document found: %+v", before[2])
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := OpenLocalIndex(cancelled, s, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenLocalIndex with a cancelled context: err = %v", err)
	}
}

// TestConcurrentUse runs writers of one document, writers of others,
// searches and counts at once; with -race it checks the locking, and at
// the end the index must hold what the store holds.
func TestConcurrentUse(t *testing.T) {
	eachIndex(t, func(t *testing.T, x Index) {
		ctx := context.Background()
		const writers, rounds = 4, 25
		var wg sync.WaitGroup
		errs := make(chan error, 4*writers*rounds)
		for w := range writers {
			wg.Add(3)
			go func() { // all rewrite the same document
				defer wg.Done()
				for r := range rounds {
					n := 1 + (w+r)%3
					chunks := make([]Chunk, n)
					for i := range chunks {
						chunks[i] = Chunk{Seq: i, Text: fmt.Sprintf("shared version w%dr%d part %d", w, r, i), Vector: vec(16, (w+r+i)%16)}
					}
					if err := x.Put(ctx, "c", "shared", chunks); err != nil {
						errs <- err
					}
				}
			}()
			go func() { // each its own document, put then deleted
				defer wg.Done()
				id := fmt.Sprintf("own-%d", w)
				for r := range rounds {
					if err := x.Put(ctx, "c", id, manual(id, coffee...)); err != nil {
						errs <- err
					}
					if r%2 == 1 { // the last round's put stays
						if err := x.Delete(ctx, "c", id); err != nil {
							errs <- err
						}
					}
				}
			}()
			go func() {
				defer wg.Done()
				for r := range rounds {
					if _, err := x.Search(ctx, "c", SearchQuery{Text: "shared version grind", Vector: vec(16, r%16), Limit: 5}); err != nil {
						errs <- err
					}
					if _, err := x.Len(ctx, "c"); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		hits := search(t, x, "c", SearchQuery{Text: "shared version", Limit: 100})
		if len(hits) < 1 || len(hits) > 3 {
			t.Fatalf("the shared document has %d chunks indexed, want one version's 1 to 3: %q", len(hits), texts(hits))
		}
		version := strings.Fields(hits[0].Text)[2]
		for _, h := range hits {
			if !strings.Contains(h.Text, version) {
				t.Fatalf("chunks of two versions indexed together: %q", texts(hits))
			}
		}
		mustLen(t, x, "c", len(hits)+writers*len(coffee))
		local, ok := x.(*LocalIndex)
		if !ok {
			return
		}
		var stored []string
		if err := local.store.ForEachKnowledgeChunk(ctx, "c", func(c koe.KnowledgeChunk) error {
			if c.DocID == "shared" {
				stored = append(stored, c.Text)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		indexed := texts(hits)
		slices.Sort(indexed)
		slices.Sort(stored)
		if !slices.Equal(stored, indexed) {
			t.Fatalf("the index disagrees with the store:\nindexed %q\nstored  %q", indexed, stored)
		}
	})
}
