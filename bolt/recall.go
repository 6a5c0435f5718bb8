package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"koe"
	"koe/history"
)

// Recall buckets, under the root "recall", one bucket per conf uid:
var (
	bucketRecall     = []byte("recall")
	bucketEntries    = []byte("entries")   // history uid 0x00 seq -> JSON RecallEntry (see vectored)
	bucketVectors    = []byte("vectors")   // same key -> little-endian float32s
	bucketMarks      = []byte("marks")     // history uid -> JSON RecallMark
	bucketForgotten  = []byte("forgotten") // same key as entries -> empty: never index again
	bucketRecallMeta = []byte("meta")
	keyVectorModel   = []byte("vector_model")
)

// RecallMark returns how far a history has been indexed (ok false: not
// at all).
func (s *Store) RecallMark(ctx context.Context, confUID, historyUID string) (mark koe.RecallMark, ok bool, err error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return koe.RecallMark{}, false, err
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		b := recallSub(tx, confUID, bucketMarks)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(historyUID))
		if v == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(v, &mark)
	})
	if err != nil {
		return koe.RecallMark{}, false, fmt.Errorf("read recall mark of history %q of conf %q: %w", historyUID, confUID, err)
	}
	return mark, ok, nil
}

// SaveRecall stores entries of a history and moves its mark from from to
// mark, in one transaction, and returns the entries stored: those
// forgotten before are skipped. The mark moves only if it still is from
// (the zero mark: none): otherwise another indexer saved first, nothing
// is written and the error is ErrMarkMoved, so that two indexers of one
// history never store its entries twice nor move its mark back. A
// history that no longer exists gets nothing (ErrNotFound): an indexer
// that read it just before it was deleted must not bring its memories
// back.
func (s *Store) SaveRecall(ctx context.Context, confUID, historyUID string, from, mark koe.RecallMark, entries []koe.RecallEntry) ([]koe.RecallEntry, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	vals := make([][]byte, len(entries))
	for i, e := range entries {
		v, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode recall entry: %w", err)
		}
		vals[i] = v
	}
	markVal, err := json.Marshal(mark)
	if err != nil {
		return nil, fmt.Errorf("encode recall mark: %w", err)
	}
	var missing, moved bool
	var saved []koe.RecallEntry
	err = s.write(func(tx *bbolt.Tx) error {
		missing, moved = false, false // a batched transaction may run again
		saved = saved[:0]
		if historyBucket(tx, confUID, historyUID) == nil {
			missing = true
			return nil
		}
		conf, err := recallConf(tx, confUID)
		if err != nil {
			return err
		}
		var stored koe.RecallMark
		if v := conf.Bucket(bucketMarks).Get([]byte(historyUID)); v != nil {
			if err := json.Unmarshal(v, &stored); err != nil {
				return fmt.Errorf("decode recall mark: %w", err)
			}
		}
		if stored != from {
			moved = true
			return nil
		}
		ents, forgotten := recallEntries(conf), conf.Bucket(bucketForgotten)
		for i, e := range entries {
			k := ents.key(historyUID, e.Seq)
			if forgotten.Get(k) != nil {
				continue
			}
			saved = append(saved, e)
			if err := ents.put(k, vals[i], e.Vector); err != nil {
				return err
			}
		}
		return conf.Bucket(bucketMarks).Put([]byte(historyUID), markVal)
	})
	if err != nil {
		return nil, fmt.Errorf("save recall of history %q of conf %q: %w", historyUID, confUID, err)
	}
	if missing {
		return nil, fmt.Errorf("save recall of history %q of conf %q: %w", historyUID, confUID, koe.ErrNotFound)
	}
	if moved {
		return nil, fmt.Errorf("save recall of history %q of conf %q from %+v: %w", historyUID, confUID, from, koe.ErrMarkMoved)
	}
	return saved, nil
}

// SetRecallVectors stores the embeddings of entries already saved (their
// HistoryUID, Seq and Vector count), made with model. Entries gone since
// are skipped. Vectors of another model are dropped first: they could not
// be compared with these.
func (s *Store) SetRecallVectors(ctx context.Context, confUID, model string, entries []koe.RecallEntry) error {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return err
	}
	err := s.write(func(tx *bbolt.Tx) error {
		conf, err := recallConf(tx, confUID)
		if err != nil {
			return err
		}
		if err := setVectorModel(conf, model); err != nil {
			return err
		}
		ents := recallEntries(conf)
		for _, e := range entries {
			k := ents.key(e.HistoryUID, e.Seq)
			if !ents.has(k) || e.Vector == nil {
				continue
			}
			if err := ents.putVector(k, e.Vector); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store recall vectors of conf %q: %w", confUID, err)
	}
	return nil
}

// setVectorModel records the model of a conf's vectors, dropping every
// vector made by another.
func setVectorModel(conf *bbolt.Bucket, model string) error {
	meta := conf.Bucket(bucketRecallMeta)
	if string(meta.Get(keyVectorModel)) == model {
		return nil
	}
	if err := conf.DeleteBucket(bucketVectors); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return fmt.Errorf("drop vectors: %w", err)
	}
	if _, err := conf.CreateBucket(bucketVectors); err != nil {
		return fmt.Errorf("vectors bucket: %w", err)
	}
	return meta.Put(keyVectorModel, []byte(model))
}

// RecallVectorModel is the model that made the conf's stored vectors ("":
// none).
func (s *Store) RecallVectorModel(ctx context.Context, confUID string) (string, error) {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return "", err
	}
	var model string
	err := s.db.View(func(tx *bbolt.Tx) error {
		if meta := recallSub(tx, confUID, bucketRecallMeta); meta != nil {
			model = string(meta.Get(keyVectorModel))
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("read recall vector model of conf %q: %w", confUID, err)
	}
	return model, nil
}

// ForEachRecall calls fn with every entry of a conf, with its vector, in
// history and sequence order. fn must not call the store.
func (s *Store) ForEachRecall(ctx context.Context, confUID string, fn func(koe.RecallEntry) error) error {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return err
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		ents := recallEntries(recallConfBucket(tx, confUID))
		return eachVectored(ctx, ents, nil, nil, 0, func(uid string, seq uint64, e koe.RecallEntry, vec []float32) error {
			e.HistoryUID, e.Seq, e.Vector = uid, seq, vec
			return fn(e)
		})
	})
	if err != nil {
		return fmt.Errorf("read recall of conf %q: %w", confUID, err)
	}
	return nil
}

// RecallMarks returns the mark of every indexed history of a conf.
func (s *Store) RecallMarks(ctx context.Context, confUID string) (map[string]koe.RecallMark, error) {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return nil, err
	}
	marks := map[string]koe.RecallMark{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		b := recallSub(tx, confUID, bucketMarks)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var m koe.RecallMark
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("decode recall mark of %q: %w", k, err)
			}
			marks[string(k)] = m
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read recall marks of conf %q: %w", confUID, err)
	}
	return marks, nil
}

// ForgetRecall removes one entry for good: it stays forgotten through
// rebuilds. It reports whether the entry existed.
func (s *Store) ForgetRecall(ctx context.Context, confUID, historyUID string, seq uint64) (bool, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return false, err
	}
	var existed bool
	err := s.db.Update(func(tx *bbolt.Tx) error {
		if historyBucket(tx, confUID, historyUID) == nil {
			return nil // nothing to forget, and no tombstone to leak
		}
		conf, err := recallConf(tx, confUID)
		if err != nil {
			return err
		}
		ents := recallEntries(conf)
		k := ents.key(historyUID, seq)
		if existed, err = ents.remove(k); err != nil {
			return err
		}
		return conf.Bucket(bucketForgotten).Put(k, nil)
	})
	if err != nil {
		return false, fmt.Errorf("forget recall entry %d of history %q of conf %q: %w", seq, historyUID, confUID, err)
	}
	return existed, nil
}

// ClearRecall drops a conf's entries, vectors and marks so that its index
// is built again from the histories. What was forgotten stays forgotten.
func (s *Store) ClearRecall(ctx context.Context, confUID string) error {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		conf, err := recallConf(tx, confUID)
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bucketEntries, bucketVectors, bucketMarks} {
			if err := conf.DeleteBucket(name); err != nil {
				return err
			}
			if _, err := conf.CreateBucket(name); err != nil {
				return err
			}
		}
		return conf.Bucket(bucketRecallMeta).Delete(keyVectorModel)
	})
	if err != nil {
		return fmt.Errorf("clear recall of conf %q: %w", confUID, err)
	}
	return nil
}

// dropRecall removes everything recall holds of one history (called by
// Delete, in its transaction).
func dropRecall(tx *bbolt.Tx, confUID, historyUID string) error {
	conf := recallConfBucket(tx, confUID)
	if conf == nil {
		return nil
	}
	if _, err := recallEntries(conf).drop(historyUID, conf.Bucket(bucketForgotten)); err != nil {
		return fmt.Errorf("drop recall of history %q: %w", historyUID, err)
	}
	if marks := conf.Bucket(bucketMarks); marks != nil {
		return marks.Delete([]byte(historyUID))
	}
	return nil
}

// Confs lists the conf uids that have histories.
func (s *Store) Confs(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []string
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketHistories).ForEachBucket(func(k []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list confs: %w", err)
	}
	return out, nil
}

// Since returns up to limit records of a history stored after sequence
// after, oldest first, metadata included (Seq tells where to go on).
func (s *Store) Since(ctx context.Context, confUID, historyUID string, after uint64, limit int) ([]koe.Record, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	if err := koe.CheckPageLimit(limit); err != nil {
		return nil, fmt.Errorf("records of history %q of conf %q: %w", historyUID, confUID, err)
	}
	return s.records(ctx, confUID, historyUID, after, limit)
}

// recallConf returns a conf's recall bucket with its sub-buckets, creating
// what is missing.
func recallConf(tx *bbolt.Tx, confUID string) (*bbolt.Bucket, error) {
	return confBucket(tx, bucketRecall, confUID, bucketEntries, bucketVectors, bucketMarks, bucketForgotten, bucketRecallMeta)
}

// recallConfBucket is the recall bucket of a conf, or nil.
func recallConfBucket(tx *bbolt.Tx, conf string) *bbolt.Bucket {
	return subBucket(tx, bucketRecall, conf, nil)
}

// recallSub returns a sub-bucket of a conf's recall bucket, or nil.
func recallSub(tx *bbolt.Tx, confUID string, name []byte) *bbolt.Bucket {
	return subBucket(tx, bucketRecall, confUID, name)
}
