package recall

import (
	"fmt"
	"testing"
	"time"

	"koe"
)

// storedVectors counts a conf's stored entries and those with a vector.
func storedVectors(t *testing.T, f *fixture, conf string) (entries, withVectors int) {
	t.Helper()
	ctx := t.Context()
	err := f.store.ForEachRecall(ctx, conf, func(e koe.RecallEntry) error {
		entries++
		if len(e.Vector) == testDims {
			withVectors++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries, withVectors
}

func TestVectorRanking(t *testing.T) {
	ctx := t.Context()
	emb := &testEmbedder{model: "e1"}
	f := newFixture(t, Options{Embedder: emb})
	dogHistories(f)

	st, err := f.svc.Stats(ctxT(t), "mika")
	if err != nil || st.Memories != 9 || st.WithVectors != 9 {
		t.Fatalf("Stats = %+v, %v; want every memory with a vector", st, err)
	}
	if n, v := storedVectors(t, f, "mika"); n != 9 || v != 9 {
		t.Fatalf("stored %d entries, %d with vectors", n, v)
	}
	if m, _ := f.store.RecallVectorModel(ctx, "mika"); m != "e1" {
		t.Fatalf("vector model = %q", m)
	}

	// No word in common with the fact: only its meaning finds it.
	q := Query{ConfUID: "mika", HistoryUID: "b", Exclude: []int{1, 2}, Text: "tell me about your canine friend", Budget: 60}
	b := f.recall(q)
	if !b.Vectors {
		t.Fatal("Vectors is false with a working embedder")
	}
	if rankOf(b, dogFact) != 1 {
		t.Fatalf("the fact is not first by meaning:\n%s", b.Text)
	}

	// The endpoint failing at question time: keywords alone, no error.
	emb.fail.Store(true)
	b = f.recall(Query{ConfUID: "mika", Text: "what is my dog's name?"})
	if b.Vectors || !has(b, dogFact) {
		t.Fatalf("with the endpoint down: Vectors %v\n%s", b.Vectors, b.Text)
	}

	// A keyword-only Service never finds it by meaning.
	kw := newFixture(t, Options{})
	dogHistories(kw)
	if b := kw.recall(q); has(b, dogFact) || b.Vectors {
		t.Fatalf("found without vectors: the test's query shares words with the fact\n%s", b.Text)
	}
}

// TestEmbedderDown: while the endpoint fails, indexing goes on by
// keywords and Settle returns; once it answers again, the next message
// brings vectors for everything missed, in several passes.
func TestEmbedderDown(t *testing.T) {
	ctx := t.Context()
	emb := &testEmbedder{model: "e1"}
	emb.fail.Store(true)
	f := newFixture(t, Options{Embedder: emb})
	dogHistories(f)
	const many = backfillBatch + 50
	var lines []say
	for i := range many {
		lines = append(lines, user("Ann", fmt.Sprintf("note %d about the weather", i)))
	}
	f.create("mika", "long", talk(t0.Add(500*time.Hour), lines...)...)
	f.settle()
	if emb.calls.Load() == 0 {
		t.Fatal("the embedder was never asked")
	}

	b := f.recall(Query{ConfUID: "mika", Text: "what is my dog's name?"})
	if b.Vectors || !has(b, dogFact) {
		t.Fatalf("with the endpoint down: Vectors %v\n%s", b.Vectors, b.Text)
	}
	st, _ := f.svc.Stats(ctxT(t), "mika")
	total := 9 + many
	if st.Memories != total || st.WithVectors != 0 {
		t.Fatalf("Stats while down = %+v", st)
	}

	emb.fail.Store(false)
	f.add("mika", "b", talk(t0.Add(600*time.Hour), user("Ann", "Biscuit chewed my slipper"))...)
	f.settle()
	total++
	st, _ = f.svc.Stats(ctxT(t), "mika")
	if st.Memories != total || st.WithVectors != total {
		t.Fatalf("Stats after the endpoint came back = %+v, want all %d with vectors", st, total)
	}
	if n, v := storedVectors(t, f, "mika"); n != total || v != total {
		t.Fatalf("stored %d entries, %d with vectors; want %d", n, v, total)
	}
	if b := f.recall(Query{ConfUID: "mika", HistoryUID: "b", Exclude: []int{1, 2}, Text: "tell me about your canine friend", Budget: 60}); !b.Vectors || rankOf(b, dogFact) != 1 {
		t.Fatalf("after the backfill: Vectors %v\n%s", b.Vectors, b.Text)
	}

	// Restarted with another model: its vectors cannot be compared with
	// the stored ones, which are made again.
	f.opts.Embedder = &testEmbedder{model: "e2"}
	f.restart()
	st, _ = f.svc.Stats(ctxT(t), "mika")
	if st.Memories != total || st.WithVectors != 0 {
		t.Fatalf("Stats with another model = %+v; the old vectors must be left out", st)
	}
	f.add("mika", "b", talk(t0.Add(700*time.Hour), user("Ann", "Biscuit is asleep"))...)
	f.settle()
	total++
	st, _ = f.svc.Stats(ctxT(t), "mika")
	if st.WithVectors != total {
		t.Fatalf("Stats after remaking vectors = %+v", st)
	}
	if m, _ := f.store.RecallVectorModel(ctx, "mika"); m != "e2" {
		t.Fatalf("vector model = %q, want e2", m)
	}
	if n, v := storedVectors(t, f, "mika"); n != total || v != total {
		t.Fatalf("stored %d entries, %d with vectors of e2", n, v)
	}
}
