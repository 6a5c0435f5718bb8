package bolt

import (
	"context"
	"fmt"

	"go.etcd.io/bbolt"

	"koe"
	"koe/history"
)

// What an instance of koe reads of recall data another instance wrote to
// the same store: the entries it saved after those this one holds, what
// it forgot, and vectors it made.

// RecallSince returns up to limit entries of a history with a sequence
// number after after, in sequence order, with their vectors. A history
// that does not exist is ErrNotFound.
func (s *Store) RecallSince(ctx context.Context, confUID, historyUID string, after uint64, limit int) ([]koe.RecallEntry, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	if err := koe.CheckPageLimit(limit); err != nil {
		return nil, fmt.Errorf("recall entries of history %q of conf %q: %w", historyUID, confUID, err)
	}
	var out []koe.RecallEntry
	missing := false
	err := s.db.View(func(tx *bbolt.Tx) error {
		if historyBucket(tx, confUID, historyUID) == nil {
			missing = true
			return nil
		}
		if after == ^uint64(0) {
			return nil
		}
		ents := recallEntries(recallConfBucket(tx, confUID))
		return eachVectored(ctx, ents, ownerPrefix(historyUID), ents.key(historyUID, after+1), limit, func(_ string, seq uint64, e koe.RecallEntry, vec []float32) error {
			e.HistoryUID, e.Seq, e.Vector = historyUID, seq, vec
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read recall entries of history %q of conf %q: %w", historyUID, confUID, err)
	}
	if missing {
		return nil, fmt.Errorf("read recall entries of history %q of conf %q: %w", historyUID, confUID, koe.ErrNotFound)
	}
	return out, nil
}

// ForgottenRecalls returns the sequence numbers of the forgotten entries
// of a history (historyUID "": of every history of the conf), in order,
// by history uid (none for a history that does not exist).
func (s *Store) ForgottenRecalls(ctx context.Context, confUID, historyUID string) (map[string][]uint64, error) {
	if err := history.CheckConfOrHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	out := map[string][]uint64{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		var prefix []byte
		if historyUID != "" {
			prefix = ownerPrefix(historyUID)
		}
		ents := recallEntries(nil) // the tombstones are keyed as entries
		return scan(recallSub(tx, confUID, bucketForgotten), prefix, nil, func(k, _ []byte) error {
			uid, seq, ok := ents.parse(k)
			if !ok {
				return fmt.Errorf("recall key %x is malformed", k)
			}
			out[uid] = append(out[uid], seq)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read forgotten recall entries of history %q of conf %q: %w", historyUID, confUID, err)
	}
	return out, nil
}

// FillRecallVectors gives each of entries (by HistoryUID and Seq) that
// has none the vector stored for it, if the conf's vectors are model's,
// and reports how many it gave: vectors another instance made need not
// be made again.
func (s *Store) FillRecallVectors(ctx context.Context, confUID, model string, entries []koe.RecallEntry) (int, error) {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.View(func(tx *bbolt.Tx) error {
		conf := recallConfBucket(tx, confUID)
		if model == "" || conf == nil {
			return nil
		}
		meta, ents := conf.Bucket(bucketRecallMeta), recallEntries(conf)
		if meta == nil || ents.vectors == nil || string(meta.Get(keyVectorModel)) != model {
			return nil
		}
		for i := range entries {
			e := &entries[i]
			if e.Vector != nil {
				continue
			}
			if v := ents.vectorOf(ents.key(e.HistoryUID, e.Seq)); v != nil {
				e.Vector = v
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read recall vectors of conf %q: %w", confUID, err)
	}
	return n, nil
}
