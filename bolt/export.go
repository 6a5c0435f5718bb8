package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"koe"
	"koe/history"
)

// The export reads everything the store keeps, as stored, for `koe
// migrate`. What it passes to its callback is a copy, read in a
// transaction that has ended: the callback may take its time (write it
// elsewhere) without holding the database.

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
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: lockTimeout, ReadOnly: true})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("open history database %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("open history database %s: %w", path, err)
	}
	return &Store{db: db, now: time.Now}, nil
}

// ExportHistories calls fn with each history, by conf then uid, each read
// in a transaction of its own.
func (s *Store) ExportHistories(ctx context.Context, fn func(*history.HistoryExport) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("export histories: %w", err)
	}
	type id struct{ conf, uid string }
	var ids []id
	err := s.db.View(func(tx *bbolt.Tx) error {
		root := tx.Bucket(bucketHistories)
		if root == nil {
			return nil
		}
		return root.ForEachBucket(func(conf []byte) error {
			cb := root.Bucket(conf)
			return cb.ForEachBucket(func(uid []byte) error {
				if cb.Bucket(uid).Bucket(bucketMessages) != nil { // else not a history (see historyBucket)
					ids = append(ids, id{string(conf), string(uid)})
				}
				return nil
			})
		})
	})
	if err != nil {
		return fmt.Errorf("export histories: %w", err)
	}
	for _, h := range ids {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("export histories: %w", err)
		}
		var e *history.HistoryExport
		err := s.db.View(func(tx *bbolt.Tx) error {
			hb := historyBucket(tx, h.conf, h.uid)
			if hb == nil {
				return koe.ErrNotFound // deleted since the listing
			}
			var err error
			e, err = exportHistory(hb, recallConfBucket(tx, h.conf), h.conf, h.uid)
			return err
		})
		if errors.Is(err, koe.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("export history %q of conf %q: %w", h.uid, h.conf, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func exportHistory(h, rc *bbolt.Bucket, conf, uid string) (*history.HistoryExport, error) {
	e := &history.HistoryExport{Conf: conf, UID: uid}
	msgs := h.Bucket(bucketMessages)
	e.LastSeq = msgs.Sequence()
	err := msgs.ForEach(func(k, v []byte) error {
		if v == nil || len(k) != 8 {
			return fmt.Errorf("record key %x is not a sequence number", k)
		}
		seq := binary.BigEndian.Uint64(k)
		e.LastSeq = max(e.LastSeq, seq)
		e.Records = append(e.Records, history.ExportRecord{Seq: seq, Body: bytes.Clone(v)})
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
			e.Images = append(e.Images, history.ExportImage{Seq: binary.BigEndian.Uint64(k), Index: binary.BigEndian.Uint32(k[8:]), Data: bytes.Clone(v)})
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
			e.Summaries = append(e.Summaries, history.ExportSummary{FirstTurn: binary.BigEndian.Uint64(k), Body: bytes.Clone(v)})
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
		e.Mark = bytes.Clone(marks.Get([]byte(uid)))
	}
	ents := recallEntries(rc)
	err = ents.eachStored(uid, func(seq uint64, body, vector []byte) error {
		e.Recall = append(e.Recall, history.ExportRecall{Seq: seq, Body: body, Vector: vector})
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = scan(rc.Bucket(bucketForgotten), ownerPrefix(uid), nil, func(k, _ []byte) error {
		_, seq, ok := ents.parse(k)
		if !ok {
			return fmt.Errorf("forgotten recall key %x is malformed", k)
		}
		e.Forgotten = append(e.Forgotten, seq)
		return nil
	})
	return e, err
}

// ExportConfs calls fn with the prompts, recall vector model and knowledge
// documents of each character that has any, all read in one transaction.
func (s *Store) ExportConfs(ctx context.Context, fn func(*history.ConfExport) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("export characters: %w", err)
	}
	confs := map[string]*history.ConfExport{}
	var order []string
	err := s.db.View(func(tx *bbolt.Tx) error {
		get := func(conf []byte) *history.ConfExport {
			c, ok := confs[string(conf)]
			if !ok {
				c = &history.ConfExport{Conf: string(conf), Prompts: map[string][]byte{}}
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
						c.Prompts[string(k)] = bytes.Clone(v)
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
		return nil
	})
	if err != nil {
		return fmt.Errorf("export characters: %w", err)
	}
	for _, conf := range order {
		if err := fn(confs[conf]); err != nil {
			return err
		}
	}
	return nil
}

func exportDocs(kb *bbolt.Bucket) ([]history.ExportDoc, error) {
	meta, texts := kb.Bucket(bucketDocs), kb.Bucket(bucketTexts)
	if meta == nil {
		return nil, nil
	}
	chunks := knowledgeChunks(kb)
	var out []history.ExportDoc
	err := meta.ForEach(func(id, m []byte) error {
		d := history.ExportDoc{ID: string(id), Meta: bytes.Clone(m)}
		if texts != nil {
			d.Text = bytes.Clone(texts.Get(id))
		}
		if d.Text == nil {
			return fmt.Errorf("document %q has no text", id)
		}
		err := chunks.eachStored(string(id), func(seq uint64, body, vector []byte) error {
			d.Chunks = append(d.Chunks, history.ExportChunk{Seq: uint32(seq), Body: body, Vector: vector})
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
