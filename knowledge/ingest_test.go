package knowledge_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"koe/internal/pdftext/pdftest"
	"koe/knowledge"
)

// refusedAs checks that err refuses the file with kind, naming key.
func refusedAs(t *testing.T, err error, kind knowledge.FileErrorKind, key string) *knowledge.FileError {
	t.Helper()
	var fe *knowledge.FileError
	if !errors.As(err, &fe) || fe.Kind != kind || !strings.Contains(fe.Reason, key) {
		t.Fatalf("got %v, want a %q refusal naming %s", err, kind, key)
	}
	return fe
}

// noDocuments checks that nothing of a refused file was kept.
func noDocuments(t *testing.T, s *knowledge.Service) {
	t.Helper()
	if docs, err := s.List(testCtx(t), conf); err != nil || len(docs) != 0 {
		t.Fatalf("documents after a refusal: %+v, %v", docs, err)
	}
}

// A PDF of a few kilobytes whose pages all draw one stream that inflates
// to a megabyte is refused by its document's budget, for the knowledge
// base and for a conversation alike.
func TestHostilePDFIsRefusedByItsInflatedBudget(t *testing.T) {
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), func(o *knowledge.Options) {
		o.Config.MaxInflatedBytes = 2 << 20
	})
	bomb := knowledge.Upload{Name: "bomb.pdf", Mime: "application/pdf", Data: pdftest.InflatingPages(6, 1<<20, true)}
	_, err := s.Add(testCtx(t), conf, bomb, count, nil)
	fe := refusedAs(t, err, knowledge.ErrKindInflated, "knowledge.max_inflated_bytes allows (2 MB)")
	if fe.Filename != "bomb.pdf" {
		t.Fatalf("refusal of %q", fe.Filename)
	}
	noDocuments(t, s)
	_, err = s.ReadFile(testCtx(t), bomb, count, 1<<30)
	refusedAs(t, err, knowledge.ErrKindInflated, "knowledge.max_inflated_bytes")

	cmap := knowledge.Upload{Name: "fonts.pdf", Data: pdftest.InflatingCMap(4<<20, 1)}
	_, err = s.Add(testCtx(t), conf, cmap, count, nil)
	refusedAs(t, err, knowledge.ErrKindInflated, "knowledge.max_inflated_bytes")
	noDocuments(t, s)
}

// JSON nested deep indents to thousands of times its size: six kilobytes
// of brackets would be eighteen megabytes once indented. It is refused
// before it is indented; JSON of a real shape is read as before.
func TestDeepJSONIsRefusedBeforeItIsIndented(t *testing.T) {
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), func(o *knowledge.Options) {
		o.Config.MaxInflatedBytes = 1 << 20
	})
	deep := strings.Repeat("[", 3000) + strings.Repeat("]", 3000)
	_, err := s.Add(testCtx(t), conf, knowledge.Upload{Name: "deep.json", Data: []byte(deep)}, count, nil)
	refusedAs(t, err, knowledge.ErrKindInflated, "knowledge.max_inflated_bytes")
	noDocuments(t, s)
	if d, err := s.Add(testCtx(t), conf, knowledge.Upload{Name: "config.json", Data: testdata(t, "config.json")}, count, nil); err != nil || d.Format != "json" {
		t.Fatalf("a real JSON file: %+v, %v", d, err)
	}
}

// countingTokens counts as count does and tallies the bytes it was given.
type countingTokens struct{ bytes atomic.Int64 }

func (c *countingTokens) count(s string) int {
	c.bytes.Add(int64(len(s)))
	return count(s)
}

// A file of one word of megabytes stops being counted at the document's
// token budget, and is refused naming it: counting it whole, then
// chunking it, took minutes.
func TestOneWordFileStopsAtTheTokenBudget(t *testing.T) {
	const budget = 20000
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), func(o *knowledge.Options) {
		o.Config.MaxDocumentTokens = budget
	})
	word := bytes.Repeat([]byte("a"), 4<<20)
	var counted countingTokens
	_, err := s.Add(testCtx(t), conf, knowledge.Upload{Name: "word.txt", Data: word}, counted.count, nil)
	refusedAs(t, err, knowledge.ErrKindTooLong, "20,000 tokens long, the most knowledge.max_document_tokens allows")
	noDocuments(t, s)
	// A token of this text is about 8 bytes: the count stopped within a
	// stretch of the budget, far from the whole file.
	if n := counted.bytes.Load(); n > 1<<20 {
		t.Fatalf("%d of the file's %d bytes were counted", n, len(word))
	}
	_, err = s.ReadFile(testCtx(t), knowledge.Upload{Name: "word.txt", Data: word}, counted.count, 1<<30)
	refusedAs(t, err, knowledge.ErrKindTooLong, "knowledge.max_document_tokens")
}

// A file of one long word under the budget is chunked in a few counts per
// chunk: each chunk's search for its end starts from the previous
// chunk's length.
func TestOneLongWordIsChunkedInAFewPasses(t *testing.T) {
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), nil)
	word := bytes.Repeat([]byte("ab"), 256<<10)
	var counted countingTokens
	d, err := s.Add(testCtx(t), conf, knowledge.Upload{Name: "word.txt", Data: word}, counted.count, nil)
	if err != nil || d.Chunks < 2 {
		t.Fatalf("document %+v, %v", d, err)
	}
	if passes := float64(counted.bytes.Load()) / float64(len(word)); passes > 8 {
		t.Fatalf("the text was counted %.1f times over", passes)
	}
}

// A file whose reading outlasts knowledge.ingest_timeout is refused,
// naming the key; counting stopped where the time ran out.
func TestIngestTimeoutRefusesTheFile(t *testing.T) {
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), func(o *knowledge.Options) {
		// Counting the file takes about a second; a millisecond runs
		// out long before.
		o.Config.IngestTimeout = time.Millisecond
	})
	word := bytes.Repeat([]byte("a"), 2<<20)
	var counted countingTokens
	_, err := s.Add(testCtx(t), conf, knowledge.Upload{Name: "slow.txt", Data: word}, counted.count, nil)
	refusedAs(t, err, knowledge.ErrKindTimeout, "knowledge.ingest_timeout allows (1ms)")
	noDocuments(t, s)
	if n := counted.bytes.Load(); n >= int64(len(word)) {
		t.Fatalf("the whole file was counted (%d bytes) after the time ran out", n)
	}
}

// blockingCount counts as count does, but its first call waits for
// release, after saying it has begun.
type blockingCount struct {
	once             sync.Once
	entered, release chan struct{}
	bytes            atomic.Int64 // counted
}

func newBlockingCount() *blockingCount {
	return &blockingCount{entered: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockingCount) count(s string) int {
	b.once.Do(func() {
		close(b.entered)
		<-b.release
	})
	b.bytes.Add(int64(len(s)))
	return count(s)
}

// longStory is story.md over and over: a megabyte of prose, many
// stretches of counting long.
func longStory(t *testing.T) knowledge.Upload {
	story := testdata(t, "story.md")
	return knowledge.Upload{Name: "saga.md", Data: bytes.Repeat(story, (1<<20)/len(story)+1)}
}

// Files are read at most knowledge.max_concurrent_ingests at once; one
// more is refused, naming the key, and taken once a place is free.
func TestConcurrentIngestsAreBounded(t *testing.T) {
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), func(o *knowledge.Options) {
		o.Config.MaxConcurrentIngests = 1
	})
	story := knowledge.Upload{Name: "story.md", Data: testdata(t, "story.md")}
	block := newBlockingCount()
	first := make(chan error, 1)
	go func() {
		_, err := s.Add(testCtx(t), conf, story, block.count, nil)
		first <- err
	}()
	<-block.entered
	rules := knowledge.Upload{Name: "rules.html", Data: testdata(t, "rules.html")}
	_, err := s.Add(testCtx(t), conf, rules, count, nil)
	refusedAs(t, err, knowledge.ErrKindOverloaded, "koe is already reading as many files as knowledge.max_concurrent_ingests allows (1)")
	_, err = s.ReadFile(testCtx(t), rules, count, 1<<30)
	refusedAs(t, err, knowledge.ErrKindOverloaded, "knowledge.max_concurrent_ingests")
	close(block.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(testCtx(t), conf, rules, count, nil); err != nil {
		t.Fatalf("once the first was read: %v", err)
	}
}

// An uploader that leaves (its context ends) stops the reading of its
// file where it is: nothing is kept, and its place is free again.
func TestLeavingStopsAnIngest(t *testing.T) {
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), func(o *knowledge.Options) {
		o.Config.MaxConcurrentIngests = 1
	})
	ctx, leave := context.WithCancel(testCtx(t))
	block := newBlockingCount()
	saga := longStory(t)
	done := make(chan error, 1)
	go func() {
		_, err := s.Add(ctx, conf, saga, block.count, nil)
		done <- err
	}()
	<-block.entered
	leave()
	close(block.release)
	if err := <-done; !errors.Is(err, context.Canceled) || knowledge.IsFileError(err) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if n := block.bytes.Load(); n >= int64(len(saga.Data)) {
		t.Fatalf("%d bytes were counted after the uploader left, the whole file", n)
	}
	noDocuments(t, s)
	if _, err := s.Add(testCtx(t), conf, knowledge.Upload{Name: "rules.html", Data: testdata(t, "rules.html")}, count, nil); err != nil {
		t.Fatalf("after the uploader left: %v", err)
	}
}

// Closing the service stops the ingests under way, and waits for them.
func TestCloseStopsIngests(t *testing.T) {
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), nil)
	block := newBlockingCount()
	saga := longStory(t)
	done := make(chan error, 1)
	go func() {
		_, err := s.Add(testCtx(t), conf, saga, block.count, nil)
		done <- err
	}()
	<-block.entered
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while an ingest was under way")
	case err := <-done:
		t.Fatalf("the ingest ended before it was released: %v", err)
	case <-s.Closing():
	}
	close(block.release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if n := block.bytes.Load(); n >= int64(len(saga.Data)) {
		t.Fatalf("%d bytes were counted after Close, the whole file", n)
	}
	<-closed
}
