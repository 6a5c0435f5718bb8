package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"koe"
	"koe/history"
)

// The recall index. Rows of a history reference it, so deleting the
// history drops them in the same statement.

// isFKViolation reports a foreign key violation: a history deleted while
// rows of it were being written.
func isFKViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}

// Confs lists the conf uids that have histories, in byte order.
func (s *Store) Confs(ctx context.Context) ([]string, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT conf_uid COLLATE "C" FROM koe_histories ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list confs: %w", s.pgErr(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list confs: %w", s.pgErr(err))
	}
	return out, nil
}

// RecallMark returns how far a history has been indexed (ok false: not at
// all).
func (s *Store) RecallMark(ctx context.Context, confUID, historyUID string) (mark koe.RecallMark, ok bool, err error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return koe.RecallMark{}, false, err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var body []byte
	err = s.pool.QueryRow(ctx, `SELECT body FROM koe_recall_marks WHERE conf_uid = $1 AND uid = $2`, confUID, historyUID).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return koe.RecallMark{}, false, nil
	}
	if err == nil {
		err = json.Unmarshal(body, &mark)
	}
	if err != nil {
		return koe.RecallMark{}, false, fmt.Errorf("read recall mark of history %q of conf %q: %w", historyUID, confUID, s.pgErr(err))
	}
	return mark, true, nil
}

// RecallMarks returns the mark of every indexed history of a conf.
func (s *Store) RecallMarks(ctx context.Context, confUID string) (map[string]koe.RecallMark, error) {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return nil, err
	}
	failf := func(err error) error { return fmt.Errorf("read recall marks of conf %q: %w", confUID, err) }
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT uid, body FROM koe_recall_marks WHERE conf_uid = $1`, confUID)
	if err != nil {
		return nil, failf(s.pgErr(err))
	}
	defer rows.Close()
	marks := map[string]koe.RecallMark{}
	for rows.Next() {
		var uid string
		var body []byte
		if err := rows.Scan(&uid, &body); err != nil {
			return nil, failf(err)
		}
		var m koe.RecallMark
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, failf(fmt.Errorf("decode recall mark of %q: %w", uid, err))
		}
		marks[uid] = m
	}
	if err := rows.Err(); err != nil {
		return nil, failf(s.pgErr(err))
	}
	return marks, nil
}

// SaveRecall stores entries of a history and moves its mark from from to
// mark, in one transaction, and returns the entries stored: those
// forgotten before are skipped. The mark moves only if it still is from
// (ErrMarkMoved otherwise, and nothing is written): instances indexing one
// history at once never store its entries twice nor move its mark back.
// A history that no longer exists gets nothing (ErrNotFound).
func (s *Store) SaveRecall(ctx context.Context, confUID, historyUID string, from, mark koe.RecallMark, entries []koe.RecallEntry) ([]koe.RecallEntry, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	failf := func(err error) error {
		return fmt.Errorf("save recall of history %q of conf %q: %w", historyUID, confUID, err)
	}
	markVal, err := json.Marshal(mark)
	if err != nil {
		return nil, fmt.Errorf("encode recall mark: %w", err)
	}
	seqs := make([]int64, len(entries))
	for i, e := range entries {
		seqs[i] = pgSeq(e.Seq)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var saved []koe.RecallEntry
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The history's row, shared-locked: it cannot be deleted before
		// this commits, so its memories cannot come back after.
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM koe_histories WHERE conf_uid = $1 AND uid = $2 FOR SHARE`, confUID, historyUID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return koe.ErrNotFound
		}
		if err != nil {
			return err
		}
		claimed, err := claimRecallMark(ctx, tx, confUID, historyUID, from, markVal)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT seq FROM koe_recall_forgotten WHERE conf_uid = $1 AND uid = $2 AND seq = ANY($3)`, confUID, historyUID, seqs)
		if err != nil {
			return err
		}
		forgotten, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		skip := make(map[int64]bool, len(forgotten))
		for _, seq := range forgotten {
			skip[seq] = true
		}
		var ins vectoredRows
		for _, e := range entries {
			seq := pgSeq(e.Seq)
			if skip[seq] {
				continue
			}
			saved = append(saved, e)
			v, err := json.Marshal(e)
			if err != nil {
				return fmt.Errorf("encode recall entry: %w", err)
			}
			ins.add(seq, v, e.Vector)
		}
		if err := recallEntries.upsert(ctx, tx, confUID, historyUID, ins); err != nil {
			return fmt.Errorf("put recall entries: %w", err)
		}
		if claimed {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE koe_recall_marks SET body = $3 WHERE conf_uid = $1 AND uid = $2`,
			confUID, historyUID, markVal); err != nil {
			return fmt.Errorf("put recall mark: %w", err)
		}
		return nil
	})
	if errors.Is(err, koe.ErrMarkMoved) {
		return nil, failf(fmt.Errorf("from %+v: %w", from, err))
	}
	if err != nil {
		return nil, failf(s.pgErr(err))
	}
	return saved, nil
}

// claimRecallMark locks a history's recall mark, in tx, before entries
// are written, and checks it still is from (ErrMarkMoved otherwise): the
// savers of one history go one at a time, each from where the last left
// off. A history without a mark (from is zero) gets one now, mark
// (claimed true), which a concurrent first saver waits for and then finds
// taken.
func claimRecallMark(ctx context.Context, tx pgx.Tx, confUID, historyUID string, from koe.RecallMark, mark []byte) (claimed bool, err error) {
	var body []byte
	err = tx.QueryRow(ctx, `SELECT body FROM koe_recall_marks WHERE conf_uid = $1 AND uid = $2 FOR UPDATE`, confUID, historyUID).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		if from != (koe.RecallMark{}) {
			return false, koe.ErrMarkMoved // cleared meanwhile
		}
		tag, err := tx.Exec(ctx, `INSERT INTO koe_recall_marks (conf_uid, uid, body) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			confUID, historyUID, mark)
		if err != nil {
			return false, fmt.Errorf("put recall mark: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return false, koe.ErrMarkMoved
		}
		return true, nil
	}
	if err != nil {
		return false, err
	}
	var stored koe.RecallMark
	if err := json.Unmarshal(body, &stored); err != nil {
		return false, fmt.Errorf("decode recall mark: %w", err)
	}
	if stored != from {
		return false, koe.ErrMarkMoved
	}
	return false, nil
}

// SetRecallVectors stores the embeddings of entries already saved, made
// with model; entries gone since are skipped. Vectors of another model are
// dropped first.
func (s *Store) SetRecallVectors(ctx context.Context, confUID, model string, entries []koe.RecallEntry) error {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return err
	}
	var uids []string
	var seqs []int64
	var vecs [][]byte
	for _, e := range entries {
		if e.Vector == nil {
			continue
		}
		uids = append(uids, e.HistoryUID)
		seqs = append(seqs, pgSeq(e.Seq))
		vecs = append(vecs, history.EncodeVector(e.Vector))
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The conf's model row, locked: writers of vectors of one conf go
		// one at a time, so a model change never mixes with another's.
		if _, err := tx.Exec(ctx, `INSERT INTO koe_recall_models (conf_uid, model) VALUES ($1, '') ON CONFLICT DO NOTHING`, confUID); err != nil {
			return err
		}
		var stored string
		if err := tx.QueryRow(ctx, `SELECT model FROM koe_recall_models WHERE conf_uid = $1 FOR UPDATE`, confUID).Scan(&stored); err != nil {
			return err
		}
		if stored != model {
			if _, err := tx.Exec(ctx, `UPDATE koe_recall_entries SET vector = NULL WHERE conf_uid = $1 AND vector IS NOT NULL`, confUID); err != nil {
				return fmt.Errorf("drop vectors: %w", err)
			}
			if _, err := tx.Exec(ctx, `UPDATE koe_recall_models SET model = $2 WHERE conf_uid = $1`, confUID, model); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `
			UPDATE koe_recall_entries e SET vector = v.vector
			FROM unnest($2::text[], $3::bigint[], $4::bytea[]) AS v(uid, seq, vector)
			WHERE e.conf_uid = $1 AND e.uid = v.uid AND e.seq = v.seq`,
			confUID, uids, seqs, vecs); err != nil {
			return fmt.Errorf("put recall vectors: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store recall vectors of conf %q: %w", confUID, s.pgErr(err))
	}
	return nil
}

// RecallVectorModel is the model that made the conf's stored vectors ("":
// none).
func (s *Store) RecallVectorModel(ctx context.Context, confUID string) (string, error) {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return "", err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var model string
	err := s.pool.QueryRow(ctx, `SELECT model FROM koe_recall_models WHERE conf_uid = $1`, confUID).Scan(&model)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read recall vector model of conf %q: %w", confUID, s.pgErr(err))
	}
	return model, nil
}

// ForEachRecall calls fn with every entry of a conf, with its vector, in
// history (byte order of uids) and sequence order. fn must not call the
// store.
func (s *Store) ForEachRecall(ctx context.Context, confUID string, fn func(koe.RecallEntry) error) error {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	err := eachVectored(ctx, s, recallEntries, confUID, func(uid string, seq int64, e koe.RecallEntry, vec []float32) error {
		e.HistoryUID, e.Seq, e.Vector = uid, uint64(seq), vec
		return fn(e)
	})
	if err != nil {
		return fmt.Errorf("read recall of conf %q: %w", confUID, err)
	}
	return nil
}

// ForgetRecall removes one entry for good: it stays forgotten through
// rebuilds. It reports whether the entry existed.
func (s *Store) ForgetRecall(ctx context.Context, confUID, historyUID string, seq uint64) (bool, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return false, err
	}
	n, err := s.forget(ctx, confUID, historyUID, []uint64{seq})
	if err != nil {
		return false, fmt.Errorf("forget recall entry %d of history %q of conf %q: %w", seq, historyUID, confUID, err)
	}
	return n == 1, nil
}

// ForgetRecalls forgets many entries of one history for good, in one
// statement, and reports how many of them existed.
func (s *Store) ForgetRecalls(ctx context.Context, confUID, historyUID string, seqs []uint64) (int, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return 0, err
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	n, err := s.forget(ctx, confUID, historyUID, seqs)
	if err != nil {
		return 0, fmt.Errorf("forget %d recall entries of history %q of conf %q: %w", len(seqs), historyUID, confUID, err)
	}
	return n, nil
}

// forget drops entries and leaves tombstones, only if the history exists
// (no tombstones for histories that are not there to leak).
func (s *Store) forget(ctx context.Context, confUID, historyUID string, seqs []uint64) (int, error) {
	pg := make([]int64, len(seqs))
	for i, seq := range seqs {
		pg[i] = pgSeq(seq)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var n int
	err := s.pool.QueryRow(ctx, `
		WITH h AS (
			SELECT conf_uid, uid FROM koe_histories WHERE conf_uid = $1 AND uid = $2
		), d AS (
			DELETE FROM koe_recall_entries WHERE conf_uid = $1 AND uid = $2 AND seq = ANY($3) RETURNING seq
		), f AS (
			INSERT INTO koe_recall_forgotten (conf_uid, uid, seq)
			SELECT h.conf_uid, h.uid, s FROM h, unnest($3::bigint[]) AS s
			ON CONFLICT DO NOTHING
		)
		SELECT count(*) FROM d`, confUID, historyUID, pg).Scan(&n)
	if isFKViolation(err) {
		return 0, nil // deleted meanwhile, with its memories
	}
	if err != nil {
		return 0, s.pgErr(err)
	}
	return n, nil
}

// ClearRecall drops a conf's entries, vectors and marks so that its index
// is built again from the histories. What was forgotten stays forgotten.
func (s *Store) ClearRecall(ctx context.Context, confUID string) error {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, q := range []string{
			`DELETE FROM koe_recall_entries WHERE conf_uid = $1`,
			`DELETE FROM koe_recall_marks WHERE conf_uid = $1`,
			`DELETE FROM koe_recall_models WHERE conf_uid = $1`,
		} {
			if _, err := tx.Exec(ctx, q, confUID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("clear recall of conf %q: %w", confUID, s.pgErr(err))
	}
	return nil
}
