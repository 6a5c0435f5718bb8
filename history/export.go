package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The export reads everything the bbolt store keeps, as stored (JSON and
// vectors byte for byte), for `koe migrate`. Byte slices in what it passes
// to its callback point into bbolt's memory map: they are valid only
// until the callback returns.

// HistoryExport is one history with everything kept of it.
type HistoryExport struct {
	Conf, UID string
	// LastSeq is the sequence number the history's next record follows
	// (bbolt's bucket sequence), at least the largest record's.
	LastSeq   uint64
	Records   []ExportRecord
	Images    []ExportImage
	Summaries []ExportSummary
	Recall    []ExportRecall
	Forgotten []uint64 // recall entries forgotten for good
	Mark      []byte   // the RecallMark's JSON; nil: not indexed
}

// ExportRecord is a record's sequence number and JSON.
type ExportRecord struct {
	Seq  uint64
	Body []byte
}

// ExportImage is the bytes of image Index of record Seq.
type ExportImage struct {
	Seq   uint64
	Index uint32
	Data  []byte
}

// ExportSummary is a summary's first turn and JSON.
type ExportSummary struct {
	FirstTurn uint64
	Body      []byte
}

// ExportRecall is a recall entry's JSON and vector (nil: none).
type ExportRecall struct {
	Seq          uint64
	Body, Vector []byte
}

// ConfExport is what a character keeps apart from its histories.
type ConfExport struct {
	Conf        string
	Prompts     map[string][]byte
	VectorModel string // the model of the recall vectors ("": none)
	Docs        []ExportDoc
}

// ExportDoc is a knowledge document: its KnowledgeDoc JSON, its text as
// encodeText keeps it, and its chunks.
type ExportDoc struct {
	ID         string
	Meta, Text []byte
	Chunks     []ExportChunk
}

// ExportChunk is a knowledge chunk's JSON and vector (nil: none).
type ExportChunk struct {
	Seq          uint32
	Body, Vector []byte
}

// OpenReadOnly opens the database at path for reading only, beside no
// writer: a koe running on it holds the file lock, and after waiting
// lockTimeout for it this fails with ErrLocked. The file must exist.
func OpenReadOnly(path string, lockTimeout time.Duration) (*Store, error) {
	if lockTimeout <= 0 {
		lockTimeout = defaultLockTimeout
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open history database: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, ReadOnly: true})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("open history database %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("open history database %s: %w", path, err)
	}
	return &Store{db: db, now: time.Now}, nil
}

// ExportHistories calls fn with each history, by conf then uid, in one
// read transaction.
func (s *Store) ExportHistories(fn func(*HistoryExport) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketHistories)
		if root == nil {
			return nil
		}
		return root.ForEachBucket(func(conf []byte) error {
			cb := root.Bucket(conf)
			recall := tx.Bucket(bucketRecall)
			var rc *bolt.Bucket
			if recall != nil {
				rc = recall.Bucket(conf)
			}
			return cb.ForEachBucket(func(uid []byte) error {
				h := cb.Bucket(uid)
				if h.Bucket(bucketMessages) == nil {
					return nil // not a history (see historyBucket)
				}
				e, err := exportHistory(h, rc, string(conf), string(uid))
				if err != nil {
					return fmt.Errorf("history %q of conf %q: %w", uid, conf, err)
				}
				return fn(e)
			})
		})
	})
	if err != nil {
		return fmt.Errorf("export histories: %w", err)
	}
	return nil
}

func exportHistory(h, rc *bolt.Bucket, conf, uid string) (*HistoryExport, error) {
	e := &HistoryExport{Conf: conf, UID: uid}
	msgs := h.Bucket(bucketMessages)
	e.LastSeq = msgs.Sequence()
	err := msgs.ForEach(func(k, v []byte) error {
		if v == nil || len(k) != 8 {
			return fmt.Errorf("record key %x is not a sequence number", k)
		}
		seq := binary.BigEndian.Uint64(k)
		e.LastSeq = max(e.LastSeq, seq)
		e.Records = append(e.Records, ExportRecord{Seq: seq, Body: v})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if imgs := h.Bucket(bucketImages); imgs != nil {
		err := imgs.ForEach(func(k, v []byte) error {
			if v == nil || len(k) != 12 {
				return fmt.Errorf("image key %x is malformed", k)
			}
			e.Images = append(e.Images, ExportImage{Seq: binary.BigEndian.Uint64(k), Index: binary.BigEndian.Uint32(k[8:]), Data: v})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if sums := h.Bucket(bucketSummaries); sums != nil {
		err := sums.ForEach(func(k, v []byte) error {
			if v == nil || len(k) != 8 {
				return fmt.Errorf("summary key %x is malformed", k)
			}
			e.Summaries = append(e.Summaries, ExportSummary{FirstTurn: binary.BigEndian.Uint64(k), Body: v})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if rc == nil {
		return e, nil
	}
	if marks := rc.Bucket(bucketMarks); marks != nil {
		e.Mark = marks.Get([]byte(uid))
	}
	vecs := rc.Bucket(bucketVectors)
	err = forPrefix(rc.Bucket(bucketEntries), historyPrefix(uid), func(k, v []byte) error {
		_, seq, ok := parseRecallKey(k)
		if !ok || v == nil {
			return fmt.Errorf("recall key %x is malformed", k)
		}
		r := ExportRecall{Seq: seq, Body: v}
		if vecs != nil {
			r.Vector = vecs.Get(k)
		}
		e.Recall = append(e.Recall, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = forPrefix(rc.Bucket(bucketForgotten), historyPrefix(uid), func(k, _ []byte) error {
		_, seq, ok := parseRecallKey(k)
		if !ok {
			return fmt.Errorf("forgotten recall key %x is malformed", k)
		}
		e.Forgotten = append(e.Forgotten, seq)
		return nil
	})
	return e, err
}

// forPrefix calls fn with the keys of b (nil: none) that start with prefix.
func forPrefix(b *bolt.Bucket, prefix []byte, fn func(k, v []byte) error) error {
	if b == nil {
		return nil
	}
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// ExportConfs calls fn with the prompts, recall vector model and knowledge
// documents of each character that has any, in one read transaction.
func (s *Store) ExportConfs(fn func(*ConfExport) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		confs := map[string]*ConfExport{}
		var order []string
		get := func(conf []byte) *ConfExport {
			c, ok := confs[string(conf)]
			if !ok {
				c = &ConfExport{Conf: string(conf), Prompts: map[string][]byte{}}
				confs[c.Conf] = c
				order = append(order, c.Conf)
			}
			return c
		}
		if root := tx.Bucket(bucketPrompts); root != nil {
			err := root.ForEachBucket(func(conf []byte) error {
				c := get(conf)
				return root.Bucket(conf).ForEach(func(k, v []byte) error {
					if v != nil {
						c.Prompts[string(k)] = v
					}
					return nil
				})
			})
			if err != nil {
				return fmt.Errorf("prompts: %w", err)
			}
		}
		if root := tx.Bucket(bucketRecall); root != nil {
			err := root.ForEachBucket(func(conf []byte) error {
				if meta := root.Bucket(conf).Bucket(bucketRecallMeta); meta != nil {
					if m := meta.Get(keyVectorModel); len(m) > 0 {
						get(conf).VectorModel = string(m)
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("recall models: %w", err)
			}
		}
		if root := tx.Bucket(bucketKnowledge); root != nil {
			err := root.ForEachBucket(func(conf []byte) error {
				docs, err := exportDocs(root.Bucket(conf))
				if err != nil {
					return fmt.Errorf("knowledge of conf %q: %w", conf, err)
				}
				if len(docs) > 0 {
					get(conf).Docs = docs
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		for _, conf := range order {
			if err := fn(confs[conf]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("export characters: %w", err)
	}
	return nil
}

func exportDocs(kb *bolt.Bucket) ([]ExportDoc, error) {
	meta, texts := kb.Bucket(bucketDocs), kb.Bucket(bucketTexts)
	if meta == nil {
		return nil, nil
	}
	chunks, vecs := kb.Bucket(bucketChunks), kb.Bucket(bucketChunkVecs)
	var out []ExportDoc
	err := meta.ForEach(func(id, m []byte) error {
		d := ExportDoc{ID: string(id), Meta: m}
		if texts != nil {
			d.Text = texts.Get(id)
		}
		if d.Text == nil {
			return fmt.Errorf("document %q has no text", id)
		}
		err := forPrefix(chunks, docPrefix(string(id)), func(k, v []byte) error {
			_, seq, ok := parseChunkKey(k)
			if !ok || v == nil {
				return fmt.Errorf("chunk key %x is malformed", k)
			}
			c := ExportChunk{Seq: uint32(seq), Body: v}
			if vecs != nil {
				c.Vector = vecs.Get(k)
			}
			d.Chunks = append(d.Chunks, c)
			return nil
		})
		if err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	return out, err
}
