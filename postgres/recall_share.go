package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"koe"
	"koe/history"
)

// The reads of recall data another instance wrote.

// RecallSince returns up to limit entries of a history with a sequence
// number after after, in sequence order, with their vectors. A history
// that does not exist is ErrNotFound.
func (s *Store) RecallSince(ctx context.Context, confUID, historyUID string, after uint64, limit int) ([]koe.RecallEntry, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	failf := func(err error) error {
		return fmt.Errorf("read recall entries of history %q of conf %q: %w", historyUID, confUID, err)
	}
	if err := koe.CheckPageLimit(limit); err != nil {
		return nil, failf(err)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	// One statement: the history's row (none: it does not exist) and its
	// entries, the same snapshot.
	rows, err := s.pool.Query(ctx, `
		SELECT e.seq, e.body, e.vector FROM koe_histories h
		LEFT JOIN LATERAL (
			SELECT seq, body, vector FROM koe_recall_entries
			WHERE conf_uid = h.conf_uid AND uid = h.uid AND seq > $3
			ORDER BY seq LIMIT $4
		) e ON true
		WHERE h.conf_uid = $1 AND h.uid = $2
		ORDER BY e.seq`, confUID, historyUID, pgSeq(after), limit)
	if err != nil {
		return nil, failf(s.pgErr(err))
	}
	defer rows.Close()
	found := false
	var out []koe.RecallEntry
	for rows.Next() {
		found = true
		var seq *int64
		var body, vec []byte
		if err := rows.Scan(&seq, &body, &vec); err != nil {
			return nil, failf(err)
		}
		if seq == nil {
			continue // the history, without entries past after
		}
		var e koe.RecallEntry
		if err := json.Unmarshal(body, &e); err != nil {
			return nil, failf(fmt.Errorf("decode recall entry %d: %w", *seq, err))
		}
		e.HistoryUID, e.Seq, e.Vector = historyUID, uint64(*seq), history.DecodeVector(vec)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, failf(s.pgErr(err))
	}
	if !found {
		return nil, failf(koe.ErrNotFound)
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
	failf := func(err error) error {
		return fmt.Errorf("read forgotten recall entries of history %q of conf %q: %w", historyUID, confUID, err)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT uid, seq FROM koe_recall_forgotten
		WHERE conf_uid = $1 AND ($2 = '' OR uid = $2) ORDER BY uid, seq`, confUID, historyUID)
	if err != nil {
		return nil, failf(s.pgErr(err))
	}
	defer rows.Close()
	out := map[string][]uint64{}
	for rows.Next() {
		var uid string
		var seq int64
		if err := rows.Scan(&uid, &seq); err != nil {
			return nil, failf(err)
		}
		out[uid] = append(out[uid], uint64(seq))
	}
	if err := rows.Err(); err != nil {
		return nil, failf(s.pgErr(err))
	}
	return out, nil
}

// FillRecallVectors gives each of entries (by HistoryUID and Seq) that
// has none the vector stored for it, if the conf's vectors are model's,
// and reports how many it gave.
func (s *Store) FillRecallVectors(ctx context.Context, confUID, model string, entries []koe.RecallEntry) (int, error) {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return 0, err
	}
	failf := func(err error) error { return fmt.Errorf("read recall vectors of conf %q: %w", confUID, err) }
	var uids []string
	var seqs []int64
	at := map[entryRef]int{}
	for i, e := range entries {
		if e.Vector != nil {
			continue
		}
		at[entryRef{e.HistoryUID, pgSeq(e.Seq)}] = i
		uids = append(uids, e.HistoryUID)
		seqs = append(seqs, pgSeq(e.Seq))
	}
	if model == "" || len(uids) == 0 {
		return 0, nil
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT e.uid, e.seq, e.vector FROM koe_recall_entries e
		JOIN unnest($2::text[], $3::bigint[]) AS w(uid, seq) ON e.uid = w.uid AND e.seq = w.seq
		JOIN koe_recall_models m ON m.conf_uid = e.conf_uid AND m.model = $4
		WHERE e.conf_uid = $1 AND e.vector IS NOT NULL`, confUID, uids, seqs, model)
	if err != nil {
		return 0, failf(s.pgErr(err))
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var uid string
		var seq int64
		var vec []byte
		if err := rows.Scan(&uid, &seq, &vec); err != nil {
			return 0, failf(err)
		}
		i, ok := at[entryRef{uid, seq}]
		if v := history.DecodeVector(vec); ok && v != nil && entries[i].Vector == nil {
			entries[i].Vector = v
			n++
		}
	}
	if err := rows.Err(); err != nil {
		return 0, failf(s.pgErr(err))
	}
	return n, nil
}

// entryRef names one entry of a conf.
type entryRef struct {
	uid string
	seq int64
}
