package knowledge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"koe"
)

// ChunkStore is where the local index keeps its chunks: koe's store
// (bbolt or PostgreSQL), beside the documents.
type ChunkStore interface {
	PutKnowledgeChunks(ctx context.Context, conf, docID string, chunks []koe.KnowledgeChunk) error
	DeleteKnowledgeChunks(ctx context.Context, conf, docID string) error
	ForEachKnowledgeChunk(ctx context.Context, conf string, fn func(koe.KnowledgeChunk) error) error
	KnowledgeConfs(ctx context.Context) ([]string, error)
}

// LocalIndex is the persistent embedded store: chunks and their vectors
// in koe's database, searched in memory by BM25 fused with cosine
// similarity. Every write goes to the database first, so what a search
// finds has been stored.
type LocalIndex struct {
	store  ChunkStore
	cat    *catalog
	docs   keyedLocks
	closed atomic.Bool
}

var _ Index = (*LocalIndex)(nil)

// ErrClosed is returned by an index used after Close.
var ErrClosed = errors.New("knowledge index is closed")

// OpenLocalIndex loads every character's stored chunks into memory.
func OpenLocalIndex(ctx context.Context, chunks ChunkStore, log *slog.Logger) (*LocalIndex, error) {
	start := time.Now()
	x := &LocalIndex{store: chunks, cat: newCatalog(true)}
	confs, err := chunks.KnowledgeConfs(ctx)
	if err != nil {
		return nil, fmt.Errorf("open local knowledge index: %w", err)
	}
	total, vectors := 0, 0
	for _, conf := range confs {
		n, v, err := x.load(ctx, conf)
		if err != nil {
			return nil, fmt.Errorf("open local knowledge index: %w", err)
		}
		total, vectors = total+n, vectors+v
	}
	if log != nil {
		log.Info("knowledge index loaded", "store", "local", "characters", len(confs),
			"chunks", total, "with_vectors", vectors, "took", time.Since(start).Round(time.Millisecond))
	}
	return x, nil
}

// load reads one character's chunks into the catalog, document by
// document. The analysis is done after the read transaction (a long one
// would hold up the database's growth for every writer), and on every
// core: stemming is nearly all of a start's time. Documents are analysed
// a window at a time and indexed in stored order, so memory stays bounded
// and a reopened index ranks ties as the one before it.
func (x *LocalIndex) load(ctx context.Context, conf string) (chunks, vectors int, err error) {
	var stored []Chunk
	err = x.store.ForEachKnowledgeChunk(ctx, conf, func(c koe.KnowledgeChunk) error {
		stored = append(stored, Chunk(c))
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	var docs [][]Chunk
	for start := 0; start < len(stored); {
		end := start + 1
		for end < len(stored) && stored[end].DocID == stored[start].DocID {
			end++
		}
		docs = append(docs, stored[start:end])
		start = end
	}
	workers := runtime.GOMAXPROCS(0)
	for len(docs) > 0 {
		if err := ctx.Err(); err != nil {
			return 0, 0, fmt.Errorf("load knowledge of %q: %w", conf, err)
		}
		window := docs[:min(len(docs), 4*workers)]
		docs = docs[len(window):]
		ps := make([][]prepared, len(window))
		errs := make([]error, len(window))
		var next atomic.Int32
		var wg sync.WaitGroup
		for range min(workers, len(window)) {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < len(window); i = int(next.Add(1)) - 1 {
					ps[i], errs[i] = x.cat.prepare(window[i][0].DocID, window[i])
				}
			})
		}
		wg.Wait()
		for i, doc := range window {
			if errs[i] != nil {
				return 0, 0, fmt.Errorf("load knowledge of %q: document %q: %w", conf, doc[0].DocID, errs[i])
			}
			for _, p := range ps[i] {
				if p.vector != nil {
					vectors++
				}
			}
			x.cat.put(conf, doc[0].DocID, ps[i])
			chunks += len(doc)
			clear(doc) // the catalog has its own copies: let the stored ones go
		}
	}
	return chunks, vectors, nil
}

// stored reads conf's documents docs (docs[""]: all of them) as the store
// holds them now, ready for the catalog, without indexing them: another
// koe instance that shares the store may have changed them. A document
// without chunks in the store has no entry.
func (x *LocalIndex) stored(ctx context.Context, conf string, docs map[string]bool) (map[string][]prepared, error) {
	if x.closed.Load() {
		return nil, ErrClosed
	}
	byDoc := map[string][]Chunk{}
	err := x.store.ForEachKnowledgeChunk(ctx, conf, func(c koe.KnowledgeChunk) error {
		if docs[""] || docs[c.DocID] {
			byDoc[c.DocID] = append(byDoc[c.DocID], Chunk(c))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read knowledge of %q: %w", conf, err)
	}
	out := make(map[string][]prepared, len(byDoc))
	for id, chunks := range byDoc {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read knowledge of %q: %w", conf, err)
		}
		ps, err := x.cat.prepare(id, chunks)
		if err != nil {
			return nil, fmt.Errorf("read knowledge of %q: document %q: %w", conf, id, err)
		}
		out[id] = ps
	}
	return out, nil
}

// Put stores document docID's chunks with their vectors, replacing what
// it had, then indexes them. Vectors of one document must share one
// dimension.
func (x *LocalIndex) Put(ctx context.Context, conf, docID string, chunks []Chunk) error {
	if x.closed.Load() {
		return ErrClosed
	}
	ps, err := x.cat.prepare(docID, chunks)
	if err != nil {
		return fmt.Errorf("index chunks of document %q of %q: %w", docID, conf, err)
	}
	stored := make([]koe.KnowledgeChunk, len(chunks))
	for i, c := range chunks {
		c.DocID = docID
		stored[i] = koe.KnowledgeChunk(c)
	}
	return x.write(ctx, conf, docID, ps, func(ctx context.Context) error {
		return x.store.PutKnowledgeChunks(ctx, conf, docID, stored)
	})
}

// Delete removes document docID's chunks from the database and the index.
func (x *LocalIndex) Delete(ctx context.Context, conf, docID string) error {
	if x.closed.Load() {
		return ErrClosed
	}
	return x.write(ctx, conf, docID, nil, func(ctx context.Context) error {
		return x.store.DeleteKnowledgeChunks(ctx, conf, docID)
	})
}

// write stores, then indexes, one document's change. Writes of the same
// document wait for one another across the database write: otherwise two
// Puts could commit in one order and reach the index in the other, and
// the index would disagree with the disk until the next start. Writes of
// other documents, and every search, go on meanwhile.
func (x *LocalIndex) write(ctx context.Context, conf, docID string, ps []prepared, store func(context.Context) error) error {
	unlock := x.docs.lock(conf + "\x00" + docID)
	defer unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store chunks of document %q of %q: %w", docID, conf, err)
	}
	if err := store(ctx); err != nil {
		return fmt.Errorf("store chunks of document %q of %q: %w", docID, conf, err)
	}
	x.cat.put(conf, docID, ps)
	return nil
}

// Search ranks conf's chunks by keywords, fused with vector similarity
// when q.Vector is set. Stored vectors of another dimension than the
// query's (another model's) are not compared.
func (x *LocalIndex) Search(_ context.Context, conf string, q SearchQuery) ([]Hit, error) {
	if x.closed.Load() {
		return nil, ErrClosed
	}
	hits, err := x.cat.search(conf, q)
	if err != nil {
		return nil, fmt.Errorf("search knowledge of %q: %w", conf, err)
	}
	return hits, nil
}

// Len is how many chunks conf has.
func (x *LocalIndex) Len(_ context.Context, conf string) (int, error) {
	if x.closed.Load() {
		return 0, ErrClosed
	}
	return x.cat.len(conf), nil
}

// Vectors is true: this store ranks by vectors when it has them.
func (x *LocalIndex) Vectors() bool { return true }

// Close makes the index refuse further use. The database is not its to
// close.
func (x *LocalIndex) Close() error {
	x.closed.Store(true)
	return nil
}

// keyedLocks is a mutex per key, made on demand and dropped when nobody
// holds or waits for it.
type keyedLocks struct {
	mu   sync.Mutex
	held map[string]*keyedLock
}

type keyedLock struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.held == nil {
		k.held = map[string]*keyedLock{}
	}
	l := k.held[key]
	if l == nil {
		l = &keyedLock{}
		k.held[key] = l
	}
	l.refs++
	k.mu.Unlock()

	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.held, key)
		}
		k.mu.Unlock()
	}
}
