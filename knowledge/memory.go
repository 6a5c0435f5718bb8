package knowledge

import (
	"context"
	"fmt"
)

// MemoryIndex is the default store: BM25 keyword search in process, over
// chunks that are not persisted here. The Service fills it from the
// stored documents at start; re-chunking them is cheaper than keeping a
// second copy of every chunk on disk.
type MemoryIndex struct {
	cat *catalog
}

var _ Index = (*MemoryIndex)(nil)

// NewMemoryIndex makes an empty in-memory index.
func NewMemoryIndex() *MemoryIndex { return &MemoryIndex{cat: newCatalog(false)} }

// Put replaces document docID's chunks; their vectors are ignored.
func (x *MemoryIndex) Put(ctx context.Context, conf, docID string, chunks []Chunk) error {
	ps, err := x.cat.prepare(docID, chunks)
	if err != nil {
		return fmt.Errorf("index chunks of document %q of %q: %w", docID, conf, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("index chunks of document %q of %q: %w", docID, conf, err)
	}
	x.cat.put(conf, docID, ps)
	return nil
}

// Delete removes document docID's chunks.
func (x *MemoryIndex) Delete(_ context.Context, conf, docID string) error {
	x.cat.delete(conf, docID)
	return nil
}

// Search ranks conf's chunks by keywords; q.Vector is ignored.
func (x *MemoryIndex) Search(_ context.Context, conf string, q SearchQuery) ([]Hit, error) {
	hits, err := x.cat.search(conf, q)
	if err != nil {
		return nil, fmt.Errorf("search knowledge of %q: %w", conf, err)
	}
	return hits, nil
}

// Len is how many chunks conf has.
func (x *MemoryIndex) Len(_ context.Context, conf string) (int, error) { return x.cat.len(conf), nil }

// Vectors is false: this store ranks by keywords only.
func (x *MemoryIndex) Vectors() bool { return false }

// Close does nothing: there is nothing to flush.
func (x *MemoryIndex) Close() error { return nil }
