package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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
	bucketChunks    = []byte("chunks")  // chunkKey -> JSON KnowledgeChunk
	bucketChunkVecs = []byte("vectors") // chunkKey -> little-endian float32s
)

// chunkKey orders a conf's chunks by document, then sequence, so that a
// document's chunks are one key range. Valid ids hold no 0x00, so the
// separator also keeps ids that prefix one another apart.
func chunkKey(docID string, seq int) []byte {
	k := make([]byte, 0, len(docID)+5)
	k = append(k, docID...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(seq))
}

func parseChunkKey(k []byte) (string, int, bool) {
	i := bytes.IndexByte(k, 0)
	if i < 0 || len(k) != i+5 {
		return "", 0, false
	}
	return string(k[:i]), int(binary.BigEndian.Uint32(k[i+1:])), true
}

func docPrefix(docID string) []byte { return append([]byte(docID), 0) }

// PutKnowledgeDoc creates or replaces (by d.ID) a document and its text;
// pages are the byte offsets in text where each page starts (nil: none).
func (s *Store) PutKnowledgeDoc(ctx context.Context, conf string, d koe.KnowledgeDoc, text string, pages []int) error {
	if err := history.CheckDoc(ctx, conf, d.ID); err != nil {
		return err
	}
	if err := koe.CheckPages(text, pages); err != nil {
		return fmt.Errorf("put document %q of conf %q: %w", d.ID, conf, err)
	}
	meta, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode document %q: %w", d.ID, err)
	}
	body := history.EncodeText(text, pages)
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
			var d koe.KnowledgeDoc
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("decode document %q: %w", k, err)
			}
			d.ID = string(k)
			out = append(out, d)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list documents of conf %q: %w", conf, err)
	}
	// Stable: documents added in the same instant keep their id order.
	slices.SortStableFunc(out, func(a, b koe.KnowledgeDoc) int { return a.Added.Compare(b.Added) })
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
		n, err := dropChunks(kb, id)
		if err != nil {
			return err
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
	keys := make([][]byte, len(chunks))
	for i, c := range chunks {
		keys[i] = chunkKey(docID, c.Seq)
	}
	err = s.write(func(tx *bbolt.Tx) error {
		kb, err := knowledgeConf(tx, conf)
		if err != nil {
			return err
		}
		if _, err := dropChunks(kb, docID); err != nil {
			return err
		}
		cb, vb := kb.Bucket(bucketChunks), kb.Bucket(bucketChunkVecs)
		for i, c := range chunks {
			if err := cb.Put(keys[i], vals[i]); err != nil {
				return fmt.Errorf("put chunk: %w", err)
			}
			if len(c.Vector) > 0 {
				if err := vb.Put(keys[i], history.EncodeVector(c.Vector)); err != nil {
					return fmt.Errorf("put chunk vector: %w", err)
				}
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
		cb := knowledgeSub(tx, conf, bucketChunks)
		if cb == nil {
			return nil
		}
		return walkVectored(ctx, cb, knowledgeSub(tx, conf, bucketChunkVecs), "chunk", func(k []byte, c *koe.KnowledgeChunk, vec []float32) error {
			id, seq, ok := parseChunkKey(k)
			if !ok {
				return fmt.Errorf("chunk key %x is malformed", k)
			}
			c.DocID, c.Seq, c.Vector = id, seq, vec
			return nil
		}, fn)
	})
	if err != nil {
		return fmt.Errorf("read chunks of conf %q: %w", conf, err)
	}
	return nil
}

// dropChunks removes a document's chunks and vectors and returns how many
// chunks there were.
func dropChunks(kb *bbolt.Bucket, docID string) (int, error) {
	prefix := docPrefix(docID)
	n := 0
	for _, name := range [][]byte{bucketChunks, bucketChunkVecs} {
		b := kb.Bucket(name)
		if b == nil {
			continue
		}
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := c.Delete(); err != nil {
				return 0, fmt.Errorf("drop chunks of document %q: %w", docID, err)
			}
			if bytes.Equal(name, bucketChunks) {
				n++
			}
		}
	}
	return n, nil
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
	root, err := tx.CreateBucketIfNotExists(bucketKnowledge)
	if err != nil {
		return nil, fmt.Errorf("knowledge bucket: %w", err)
	}
	kb, err := root.CreateBucketIfNotExists([]byte(conf))
	if err != nil {
		return nil, fmt.Errorf("knowledge conf bucket: %w", err)
	}
	for _, name := range [][]byte{bucketDocs, bucketTexts, bucketChunks, bucketChunkVecs} {
		if _, err := kb.CreateBucketIfNotExists(name); err != nil {
			return nil, fmt.Errorf("knowledge bucket %q: %w", name, err)
		}
	}
	return kb, nil
}

func knowledgeBucket(tx *bbolt.Tx, conf string) *bbolt.Bucket {
	root := tx.Bucket(bucketKnowledge)
	if root == nil {
		return nil
	}
	return root.Bucket([]byte(conf))
}

// knowledgeSub returns a sub-bucket of a conf's knowledge bucket, or nil.
func knowledgeSub(tx *bbolt.Tx, conf string, name []byte) *bbolt.Bucket {
	kb := knowledgeBucket(tx, conf)
	if kb == nil {
		return nil
	}
	return kb.Bucket(name)
}
