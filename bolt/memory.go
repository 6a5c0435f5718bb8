package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"koe"
	"koe/history"
)

// AddSummary stores r as a summary of history historyUID. Summaries are
// keyed by their first turn, so adding a summary that starts at the same
// turn as a stored one replaces it. The history must exist; AddSummary
// never creates one.
func (s *Store) AddSummary(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return err
	}
	if err := history.CheckSummary(historyUID, r); err != nil {
		return fmt.Errorf("add summary to history %q of conf %q: %w", historyUID, confUID, err)
	}
	if r.CreatedAt == "" {
		r.CreatedAt = s.timestamp()
	}
	val, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	key := turnKey(r.Turns[0])
	// Summaries are written in the background while sessions keep
	// appending, so they share Append's batching. As in Append, a missing
	// history is a flag, not an error, so it does not make bbolt rerun the
	// rest of the batch; the flag is reset because the function may run
	// more than once.
	var missing bool
	err = s.write(func(tx *bbolt.Tx) error {
		missing = false
		h := historyBucket(tx, confUID, historyUID)
		if h == nil {
			missing = true
			return nil
		}
		// Created on first use: histories written before summaries existed,
		// and histories never summarised, simply have no bucket.
		sums, err := h.CreateBucketIfNotExists(bucketSummaries)
		if err != nil {
			return fmt.Errorf("summaries bucket: %w", err)
		}
		if err := sums.Put(key[:], val); err != nil {
			return fmt.Errorf("put summary: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add summary to history %q of conf %q: %w", historyUID, confUID, err)
	}
	if missing {
		return fmt.Errorf("add summary to history %q of conf %q: %w", historyUID, confUID, koe.ErrNotFound)
	}
	return nil
}

// Summaries returns the summaries of a history in turn order (by first
// turn), or an empty slice if it has none.
func (s *Store) Summaries(ctx context.Context, confUID, historyUID string) ([]koe.SummaryRecord, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	out := []koe.SummaryRecord{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		h := historyBucket(tx, confUID, historyUID)
		if h == nil {
			return koe.ErrNotFound
		}
		sums := h.Bucket(bucketSummaries)
		if sums == nil {
			return nil
		}
		return sums.ForEach(func(k, v []byte) error {
			if v == nil {
				return fmt.Errorf("summary %x: unexpected nested bucket", k)
			}
			var r koe.SummaryRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode summary %x: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read summaries of history %q of conf %q: %w", historyUID, confUID, err)
	}
	return out, nil
}

// turnKey is the summaries key: the first turn covered, big-endian so that
// keys sort in turn order.
func turnKey(turn int) [8]byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(turn))
	return k
}

// SetPrompt stores the prompt name of character confUID. An empty text
// deletes the prompt, so that the caller falls back to its default.
func (s *Store) SetPrompt(ctx context.Context, confUID, name, text string) error {
	if err := history.CheckPromptName(ctx, confUID, name); err != nil {
		return err
	}
	if err := koe.CheckPrompt(text); err != nil {
		return fmt.Errorf("set prompt %q of conf %q: %w", name, confUID, err)
	}
	// Prompts change only when a user edits them, so a plain transaction
	// is enough; there is nothing to batch.
	err := s.db.Update(func(tx *bbolt.Tx) error {
		root := tx.Bucket(bucketPrompts)
		if text == "" {
			conf := root.Bucket([]byte(confUID))
			if conf == nil {
				return nil
			}
			if err := conf.Delete([]byte(name)); err != nil {
				return err
			}
			// Drop the conf bucket with its last prompt so that resetting
			// prompts leaves nothing behind.
			if k, _ := conf.Cursor().First(); k == nil {
				return root.DeleteBucket([]byte(confUID))
			}
			return nil
		}
		conf, err := root.CreateBucketIfNotExists([]byte(confUID))
		if err != nil {
			return fmt.Errorf("conf bucket: %w", err)
		}
		return conf.Put([]byte(name), []byte(text))
	})
	if err != nil {
		return fmt.Errorf("set prompt %q of conf %q: %w", name, confUID, err)
	}
	return nil
}

// Prompt returns the prompt name of character confUID; ok is false if it
// has not been set (or was reset), in which case the caller uses its default.
func (s *Store) Prompt(ctx context.Context, confUID, name string) (text string, ok bool, err error) {
	if err := history.CheckPromptName(ctx, confUID, name); err != nil {
		return "", false, err
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		conf := tx.Bucket(bucketPrompts).Bucket([]byte(confUID))
		if conf == nil {
			return nil
		}
		// Get returns nil for a missing key (and for a nested bucket, which
		// SetPrompt never creates). The value is only valid inside the
		// transaction; string() copies it out.
		if v := conf.Get([]byte(name)); v != nil {
			text, ok = string(v), true
		}
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("read prompt %q of conf %q: %w", name, confUID, err)
	}
	return text, ok, nil
}
