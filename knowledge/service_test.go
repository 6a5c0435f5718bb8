package knowledge_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/agent"
	"koe/bolt"
	"koe/internal/quote"
	"koe/knowledge"
	"koe/llm"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

const conf = "streamer"

var count = agent.NewTokenizer("gpt-4o").Count

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openStore(t *testing.T, dir string) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(filepath.Join(dir, "koe.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// newService opens a service over a real bbolt file in dir, caught up.
func newService(t *testing.T, dir string, idx knowledge.Index, mutate func(*knowledge.Options)) *knowledge.Service {
	t.Helper()
	st := openStore(t, dir)
	opts := knowledge.Options{Config: knowledge.DefaultConfig(), Docs: st, Index: idx, Count: count}
	if mutate != nil {
		mutate(&opts)
	}
	s := knowledge.New(opts)
	if err := s.Open(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		_ = idx.Close()
		_ = st.Close()
	})
	return s
}

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// manual is a knowledge base too large to read whole in a small window:
// the SQLite pages of the evaluation set.
func addManual(t *testing.T, s *knowledge.Service, files ...string) {
	t.Helper()
	for _, f := range files {
		if _, err := s.Add(testCtx(t), conf, knowledge.Upload{Name: f, Mime: "text/html", Data: testdata(t, "manual/"+f)}, count, nil); err != nil {
			t.Fatalf("add %s: %v", f, err)
		}
	}
}

// A small knowledge base is read whole; a large one is searched, and the
// auto router reads passages only for a question they bear on, within the
// budget. The best passage answers the question.
func TestReadWholeOrRetrieve(t *testing.T) {
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), nil)
	ctx := testCtx(t)
	d, err := s.Add(ctx, conf, knowledge.Upload{Name: "story.md", Data: testdata(t, "story.md")}, count, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Tokens == 0 || d.Chunks == 0 || d.Format != "markdown" {
		t.Fatalf("document = %+v", d)
	}
	res, err := s.Read(ctx, knowledge.Query{ConfUID: conf, Text: "anything", InputBudget: 100000})
	if err != nil || !res.Whole || len(res.Passages) != 1 || res.Passages[0].Tokens != d.Tokens {
		t.Fatalf("small base: whole %v, %d passages, err %v", res.Whole, len(res.Passages), err)
	}

	addManual(t, s, "datatype3.html", "foreignkeys.html", "lang_datefunc.html")
	var searched bool
	q := knowledge.Query{ConfUID: conf, InputBudget: 8000, Budget: 600, OnSearch: func() { searched = true },
		Text: "Which action applies when I don't write any ON DELETE clause on a foreign key?"}
	res, err = s.Read(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if res.Whole || !res.Searched || !searched || len(res.Passages) == 0 {
		t.Fatalf("large base: whole %v searched %v (%v), %d passages", res.Whole, res.Searched, searched, len(res.Passages))
	}
	total := 0
	for _, p := range res.Passages {
		total += p.Tokens
	}
	if total > 600 {
		t.Errorf("passages take %d tokens, budget 600", total)
	}
	found := false
	for _, p := range res.Passages {
		found = found || strings.Contains(strings.Join(strings.Fields(p.Text), " "), `it defaults to "NO ACTION"`)
	}
	if !found {
		t.Errorf("the answer is not among the passages: %+v", res.Passages)
	}

	q.Text = "hello, how are you today?"
	res, err = s.Read(ctx, q)
	if err != nil || len(res.Passages) != 0 {
		t.Errorf("small talk read %d passages (match %.2f), err %v", len(res.Passages), res.Match, err)
	}
	q.Mode = knowledge.Always
	q.Text = "tell me something about dates"
	if res, err = s.Read(ctx, q); err != nil || len(res.Passages) == 0 {
		t.Errorf("Always read %d passages, err %v", len(res.Passages), err)
	}
	q.Mode = knowledge.WholeOnly
	if res, err = s.Read(ctx, q); err != nil || len(res.Passages) != 0 || res.Searched || len(res.Titles) != 4 {
		t.Errorf("WholeOnly on a large base: %d passages, searched %v, titles %v", len(res.Passages), res.Searched, res.Titles)
	}
	// Another character knows nothing of it.
	if res, err := s.Read(ctx, knowledge.Query{ConfUID: "other", Text: "foreign key", InputBudget: 8000}); err != nil || len(res.Passages) != 0 || res.Titles != nil {
		t.Errorf("another character read %+v, err %v", res, err)
	}
}

// Refused files get their own reason and leave nothing behind; a file of
// the same name replaces the old one; delete removes it and its chunks.
func TestAddRefuseReplaceDelete(t *testing.T) {
	idx := knowledge.NewMemoryIndex()
	s := newService(t, t.TempDir(), idx, func(o *knowledge.Options) { o.Config.MaxFileBytes = 200 << 10; o.Config.MaxDocuments = 2 })
	ctx := testCtx(t)
	refusals := []struct {
		name string
		data []byte
		kind knowledge.FileErrorKind
		says string
	}{
		{"empty.txt", nil, knowledge.ErrKindEmpty, "empty"},
		{"big.txt", []byte(strings.Repeat("word ", 50000)), knowledge.ErrKindTooLarge, "knowledge.max_file_bytes allows 200 KB"},
		{"image.png", testdata(t, "image.png"), knowledge.ErrKindType, "image"},
		{"broken.pdf", testdata(t, "broken.pdf"), knowledge.ErrKindCorrupt, "PDF"},
		{"../", []byte("x"), knowledge.ErrKindName, "no name"},
	}
	for _, r := range refusals {
		_, err := s.Add(ctx, conf, knowledge.Upload{Name: r.name, Data: r.data}, count, nil)
		var fe *knowledge.FileError
		if !errors.As(err, &fe) || fe.Kind != r.kind || !strings.Contains(fe.Reason, r.says) {
			t.Errorf("%s: err %v, want kind %s saying %q", r.name, err, r.kind, r.says)
		}
	}
	if docs, _ := s.List(ctx, conf); len(docs) != 0 {
		t.Fatalf("refusals left %d documents", len(docs))
	}
	if n, _ := idx.Len(ctx, conf); n != 0 {
		t.Fatalf("refusals left %d chunks", n)
	}

	var progress []string
	var mu sync.Mutex
	d1, err := s.Add(ctx, conf, knowledge.Upload{Name: "rules.html", Data: testdata(t, "rules.html")}, count, func(p knowledge.Progress) {
		mu.Lock()
		progress = append(progress, p.Stage)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if progress[0] != "reading" || progress[len(progress)-1] != "done" {
		t.Errorf("progress = %v", progress)
	}
	again, err := s.Add(ctx, conf, knowledge.Upload{Name: "rules.html", Data: []byte("<h1>Rules</h1><p>Be kind to each other.</p>")}, count, nil)
	if err != nil || again.ID != d1.ID {
		t.Fatalf("replace: %+v, %v (first id %s)", again, err, d1.ID)
	}
	if n, _ := idx.Len(ctx, conf); n != again.Chunks {
		t.Errorf("after replacing, the index holds %d chunks, the document %d", n, again.Chunks)
	}
	if _, err := s.Add(ctx, conf, knowledge.Upload{Name: "story.md", Data: testdata(t, "story.md")}, count, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.Add(ctx, conf, knowledge.Upload{Name: "third.txt", Data: []byte("a third one")}, count, nil)
	var fe *knowledge.FileError
	if !errors.As(err, &fe) || fe.Kind != knowledge.ErrKindTooMany {
		t.Errorf("third document: %v", err)
	}
	found, err := s.Delete(ctx, conf, d1.ID)
	if err != nil || !found {
		t.Fatalf("delete: %v %v", found, err)
	}
	if found, _ := s.Delete(ctx, conf, d1.ID); found {
		t.Error("deleted twice")
	}
	docs, _ := s.List(ctx, conf)
	if len(docs) != 1 || docs[0].Name != "story.md" {
		t.Errorf("left: %+v", docs)
	}
	if n, _ := idx.Len(ctx, conf); n != docs[0].Chunks {
		t.Errorf("index holds %d chunks, want %d", n, docs[0].Chunks)
	}
}

// The memory store starts empty; Open refills it from the documents kept
// in the database.
func TestMemoryIndexRefilledAtStart(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	s := knowledge.New(knowledge.Options{Config: knowledge.DefaultConfig(), Docs: st, Index: knowledge.NewMemoryIndex(), Count: count})
	if err := s.Open(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	d, err := s.Add(testCtx(t), conf, knowledge.Upload{Name: "story.md", Data: testdata(t, "story.md")}, count, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	idx := knowledge.NewMemoryIndex()
	newService(t, dir, idx, nil)
	if n, _ := idx.Len(testCtx(t), conf); n != d.Chunks {
		t.Fatalf("after a restart the index holds %d chunks, want %d", n, d.Chunks)
	}
}

// A file attached to a conversation must fit the room the window leaves;
// one that does not is refused with both numbers.
func TestReadFileFits(t *testing.T) {
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), nil)
	f, err := s.ReadFile(testCtx(t), knowledge.Upload{Name: "story.md", Data: testdata(t, "story.md")}, count, 100000)
	if err != nil || f.Tokens == 0 || f.Format != "markdown" || f.Text == "" {
		t.Fatalf("file %+v, err %v", f, err)
	}
	_, err = s.ReadFile(testCtx(t), knowledge.Upload{Name: "story.md", Data: testdata(t, "story.md")}, count, 50)
	var fe *knowledge.FileError
	if !errors.As(err, &fe) || fe.Kind != knowledge.ErrKindTooLong || !strings.Contains(fe.Reason, quote.Thousands(f.Tokens)+" tokens long: the model's window leaves 50") {
		t.Fatalf("too long: %v", err)
	}
}

// With the local store, chunks get vectors from the embeddings endpoint;
// when it is down, documents are still added and found by keywords.
func TestEmbeddingsDownFallsBackToKeywords(t *testing.T) {
	fake := fakellmtest.StartWith(t, fakellm.Script())
	emb := llm.NewEmbedder(llm.EmbeddingsConfig{BaseURL: fake.URL(), Model: "embed", Timeout: 10 * time.Second, QueryTimeout: 10 * time.Second, Batch: 16}, nil)
	dir := t.TempDir()
	st := openStore(t, dir)
	idx, err := knowledge.OpenLocalIndex(testCtx(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := knowledge.New(knowledge.Options{Config: knowledge.DefaultConfig(), Docs: st, Index: idx, Embedder: emb, Count: count})
	t.Cleanup(func() { s.Close(); _ = idx.Close(); _ = st.Close() })
	if err := s.Open(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	addManual(t, s, "datatype3.html")
	if n := len(fake.EmbeddingRequests()); n == 0 {
		t.Fatal("no chunk was embedded")
	}
	q := knowledge.Query{ConfUID: conf, InputBudget: 4000, Text: "What storage classes does SQLite have?"}
	res, err := s.Read(ctx, q)
	if err != nil || !res.Vectors || len(res.Passages) == 0 {
		t.Fatalf("with vectors: %+v, err %v", res, err)
	}
	fake.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply { return fakellm.EmbeddingReply{Status: 503} })
	if _, err := s.Add(ctx, conf, knowledge.Upload{Name: "story.md", Data: testdata(t, "story.md")}, count, nil); err != nil {
		t.Fatalf("add with the endpoint down: %v", err)
	}
	res, err = s.Read(ctx, q)
	if err != nil || res.Vectors || len(res.Passages) == 0 {
		t.Fatalf("endpoint down: vectors %v, %d passages, err %v", res.Vectors, len(res.Passages), err)
	}
}
