package bolt

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"koe"
	"koe/history"
)

// Knowledge buckets, under the root "knowledge", one bucket per conf uid:
var (
	bucketKnowledge = []byte("knowledge")
	bucketDocs      = []byte("docs")    // doc id -> JSON KnowledgeDoc
	bucketTexts     = []byte("texts")   // doc id -> page offsets and text (encodeText)
	bucketChunks    = []byte("chunks")  // doc id 0x00 seq -> JSON KnowledgeChunk (see vectored)
	bucketChunkVecs = []byte("vectors") // same key -> little-endian float32s
)

// PutKnowledgeDoc creates or replaces (by d.ID) a document and its text;
// pages are the byte offsets in text where each page starts (nil: none).
func (s *Store) PutKnowledgeDoc(ctx context.Context, conf string, d koe.KnowledgeDoc, text string, pages []int) error {
	if err := history.CheckDoc(ctx, conf, d.ID); err != nil {
		return err
	}
	meta, body, err := history.EncodeDoc(conf, d, text, pages)
	if err != nil {
		return err
	}
	err = s.write(func(tx *bbolt.Tx) error {
		kb, err := knowledgeConf(tx, conf)
		if err != nil {
			return err
		}
		if err := kb.Bucket(bucketDocs).Put([]byte(d.ID), meta); err != nil {
			return fmt.Errorf("put document: %w", err)
		}
		return kb.Bucket(bucketTexts).Put([]byte(d.ID), body)
	})
	if err != nil {
		return fmt.Errorf("put document %q of conf %q: %w", d.ID, conf, err)
	}
	return nil
}

// KnowledgeDocs lists a conf's documents, oldest first.
func (s *Store) KnowledgeDocs(ctx context.Context, conf string) ([]koe.KnowledgeDoc, error) {
	if err := history.CheckConf(ctx, conf); err != nil {
		return nil, err
	}
	out := []koe.KnowledgeDoc{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		b := knowledgeSub(tx, conf, bucketDocs)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			d, err := history.DecodeDoc(string(k), v)
			if err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list documents of conf %q: %w", conf, err)
	}
	history.SortDocs(out)
	return out, nil
}

// KnowledgeText returns a document's text and page offsets; ErrNotFound
// when it has none.
func (s *Store) KnowledgeText(ctx context.Context, conf, id string) (text string, pages []int, err error) {
	if err := history.CheckDoc(ctx, conf, id); err != nil {
		return "", nil, err
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		b := knowledgeSub(tx, conf, bucketTexts)
		if b == nil {
			return koe.ErrNotFound
		}
		v := b.Get([]byte(id))
		if v == nil {
			return koe.ErrNotFound
		}
		var derr error
		text, pages, derr = history.DecodeText(v)
		return derr
	})
	if err != nil {
		return "", nil, fmt.Errorf("read text of document %q of conf %q: %w", id, conf, err)
	}
	return text, pages, nil
}

// DeleteKnowledgeDoc removes a document, its text and its chunks, in one
// transaction, and reports whether there was anything to remove. A conf
// left with nothing loses its bucket, so that KnowledgeConfs stops
// listing it.
func (s *Store) DeleteKnowledgeDoc(ctx context.Context, conf, id string) (bool, error) {
	if err := history.CheckDoc(ctx, conf, id); err != nil {
		return false, err
	}
	var existed bool
	err := s.db.Update(func(tx *bbolt.Tx) error {
		existed = false
		kb := knowledgeBucket(tx, conf)
		if kb == nil {
			return nil
		}
		for _, name := range [][]byte{bucketDocs, bucketTexts} {
			b := kb.Bucket(name)
			if b == nil || b.Get([]byte(id)) == nil {
				continue
			}
			existed = true
			if err := b.Delete([]byte(id)); err != nil {
				return err
			}
		}
		n, err := knowledgeChunks(kb).drop(id)
		if err != nil {
			return fmt.Errorf("drop chunks of document %q: %w", id, err)
		}
		existed = existed || n > 0
		return dropIfEmpty(tx, conf)
	})
	if err != nil {
		return false, fmt.Errorf("delete document %q of conf %q: %w", id, conf, err)
	}
	return existed, nil
}

// KnowledgeConfs lists the confs that have a knowledge base: documents,
// or chunks of documents.
func (s *Store) KnowledgeConfs(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []string
	err := s.db.View(func(tx *bbolt.Tx) error {
		root := tx.Bucket(bucketKnowledge)
		if root == nil {
			return nil
		}
		return root.ForEachBucket(func(k []byte) error {
			if !knowledgeEmpty(root.Bucket(k)) {
				out = append(out, string(k))
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list confs with knowledge: %w", err)
	}
	return out, nil
}

// PutKnowledgeChunks replaces every chunk of a document with chunks, in one
// transaction. A chunk's DocID must be docID or empty; seqs must be
// distinct and fit in 32 bits.
func (s *Store) PutKnowledgeChunks(ctx context.Context, conf, docID string, chunks []koe.KnowledgeChunk) error {
	if err := history.CheckDoc(ctx, conf, docID); err != nil {
		return err
	}
	vals, err := history.EncodeChunks(conf, docID, chunks)
	if err != nil {
		return err
	}
	err = s.write(func(tx *bbolt.Tx) error {
		kb, err := knowledgeConf(tx, conf)
		if err != nil {
			return err
		}
		stored := knowledgeChunks(kb)
		if _, err := stored.drop(docID); err != nil {
			return fmt.Errorf("drop chunks of document %q: %w", docID, err)
		}
		for i, c := range chunks {
			var vec []float32
			if len(c.Vector) > 0 {
				vec = c.Vector
			}
			if err := stored.put(stored.key(docID, uint64(c.Seq)), vals[i], vec); err != nil {
				return err
			}
		}
		if len(chunks) == 0 {
			return dropIfEmpty(tx, conf)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put chunks of document %q of conf %q: %w", docID, conf, err)
	}
	return nil
}

// DeleteKnowledgeChunks removes every chunk of a document (none: no error).
func (s *Store) DeleteKnowledgeChunks(ctx context.Context, conf, docID string) error {
	return s.PutKnowledgeChunks(ctx, conf, docID, nil)
}

// ForEachKnowledgeChunk calls fn with every chunk of a conf, with its
// vector, in document and sequence order. fn must not call the store.
func (s *Store) ForEachKnowledgeChunk(ctx context.Context, conf string, fn func(koe.KnowledgeChunk) error) error {
	if err := history.CheckConf(ctx, conf); err != nil {
		return err
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		return eachVectored(ctx, knowledgeChunks(knowledgeBucket(tx, conf)), nil, nil, 0, func(id string, seq uint64, c koe.KnowledgeChunk, vec []float32) error {
			c.DocID, c.Seq, c.Vector = id, int(seq), vec
			return fn(c)
		})
	})
	if err != nil {
		return fmt.Errorf("read chunks of conf %q: %w", conf, err)
	}
	return nil
}

// dropIfEmpty removes a conf's knowledge bucket once it holds nothing.
func dropIfEmpty(tx *bbolt.Tx, conf string) error {
	root := tx.Bucket(bucketKnowledge)
	if root == nil {
		return nil
	}
	kb := root.Bucket([]byte(conf))
	if kb == nil || !knowledgeEmpty(kb) {
		return nil
	}
	if err := root.DeleteBucket([]byte(conf)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return fmt.Errorf("drop empty knowledge of conf %q: %w", conf, err)
	}
	return nil
}

func knowledgeEmpty(kb *bbolt.Bucket) bool {
	if kb == nil {
		return true
	}
	for _, name := range [][]byte{bucketDocs, bucketTexts, bucketChunks} {
		if b := kb.Bucket(name); b != nil {
			if k, _ := b.Cursor().First(); k != nil {
				return false
			}
		}
	}
	return true
}

// knowledgeConf returns a conf's knowledge bucket with its sub-buckets,
// creating what is missing.
func knowledgeConf(tx *bbolt.Tx, conf string) (*bbolt.Bucket, error) {
	return confBucket(tx, bucketKnowledge, conf, bucketDocs, bucketTexts, bucketChunks, bucketChunkVecs)
}

func knowledgeBucket(tx *bbolt.Tx, conf string) *bbolt.Bucket {
	return subBucket(tx, bucketKnowledge, conf, nil)
}

// knowledgeSub returns a sub-bucket of a conf's knowledge bucket, or nil.
func knowledgeSub(tx *bbolt.Tx, conf string, name []byte) *bbolt.Bucket {
	return subBucket(tx, bucketKnowledge, conf, name)
}
