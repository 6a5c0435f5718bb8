package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"koe/history"
)

// The import writes what the bbolt store's export read (bolt/export.go)
// into PostgreSQL, for `koe migrate`. It never replaces anything: a
// history, document, prompt or vector model already there is left as it
// is.

// Contents counts what a PostgreSQL store holds.
type Contents struct {
	Histories, Docs, Prompts int64
}

// Empty reports whether the store holds nothing a migration would write.
func (c Contents) Empty() bool { return c.Histories == 0 && c.Docs == 0 && c.Prompts == 0 }

// Contents counts the histories, knowledge documents and prompts stored.
func (s *Store) Contents(ctx context.Context) (Contents, error) {
	var c Contents
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM koe_histories),
		(SELECT count(*) FROM koe_knowledge_docs),
		(SELECT count(*) FROM koe_prompts)`).Scan(&c.Histories, &c.Docs, &c.Prompts)
	if err != nil {
		return c, fmt.Errorf("count the postgres store's contents: %w", s.pgErr(err))
	}
	return c, nil
}

// ImportHistory writes h, everything of it, in one transaction; a
// history already stored (same conf and uid) is left alone and ok is
// false. Records keep their sequence numbers and JSON.
func (s *Store) ImportHistory(ctx context.Context, h *history.HistoryExport) (ok bool, err error) {
	if err := history.CheckHistory(ctx, h.Conf, h.UID); err != nil {
		return false, err
	}
	if h.LastSeq > math.MaxInt64 {
		return false, fmt.Errorf("import history %q of conf %q: sequence %d is too large", h.UID, h.Conf, h.LastSeq)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO koe_histories (conf_uid, uid, last_seq) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			h.Conf, h.UID, int64(max(h.LastSeq, 1)))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		ok = true
		return copyHistoryRows(ctx, tx, h)
	})
	if err != nil {
		return false, fmt.Errorf("import history %q of conf %q: %w", h.UID, h.Conf, s.pgErr(err))
	}
	return ok, nil
}

// copyHistoryRows copies h's records, images, summaries and recall data
// into their tables.
func copyHistoryRows(ctx context.Context, tx pgx.Tx, h *history.HistoryExport) error {
	rows := make([][]any, 0, len(h.Records))
	for _, r := range h.Records {
		role, err := history.RecordRole(r.Body)
		if err != nil {
			return fmt.Errorf("record %d: %w", r.Seq, err)
		}
		rows = append(rows, []any{h.Conf, h.UID, pgSeq(r.Seq), recordKind(role), r.Body})
	}
	if err := copyRows(ctx, tx, "koe_records", []string{"conf_uid", "uid", "seq", "kind", "body"}, rows); err != nil {
		return err
	}
	rows = rows[:0]
	for _, i := range h.Images {
		rows = append(rows, []any{h.Conf, h.UID, pgSeq(i.Seq), int32(i.Index), i.Data})
	}
	if err := copyRows(ctx, tx, "koe_record_images", []string{"conf_uid", "uid", "seq", "idx", "data"}, rows); err != nil {
		return err
	}
	rows = rows[:0]
	for _, sm := range h.Summaries {
		if sm.FirstTurn > math.MaxInt32 {
			return fmt.Errorf("summary: turn %d is too large", sm.FirstTurn)
		}
		rows = append(rows, []any{h.Conf, h.UID, int32(sm.FirstTurn), sm.Body})
	}
	if err := copyRows(ctx, tx, "koe_summaries", []string{"conf_uid", "uid", "first_turn", "body"}, rows); err != nil {
		return err
	}
	rows = rows[:0]
	for _, r := range h.Recall {
		rows = append(rows, []any{h.Conf, h.UID, pgSeq(r.Seq), r.Body, r.Vector})
	}
	if err := copyRows(ctx, tx, "koe_recall_entries", []string{"conf_uid", "uid", "seq", "body", "vector"}, rows); err != nil {
		return err
	}
	rows = rows[:0]
	for _, seq := range h.Forgotten {
		rows = append(rows, []any{h.Conf, h.UID, pgSeq(seq)})
	}
	if err := copyRows(ctx, tx, "koe_recall_forgotten", []string{"conf_uid", "uid", "seq"}, rows); err != nil {
		return err
	}
	if h.Mark != nil {
		if _, err := tx.Exec(ctx, `INSERT INTO koe_recall_marks (conf_uid, uid, body) VALUES ($1, $2, $3)`, h.Conf, h.UID, h.Mark); err != nil {
			return fmt.Errorf("recall mark: %w", err)
		}
	}
	return nil
}

// copyRows copies rows into table with COPY; none is nothing to do.
func copyRows(ctx context.Context, tx pgx.Tx, table string, columns []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{table}, columns, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("copy into %s: %w", table, err)
	}
	return nil
}

// ConfImport counts what ImportConf wrote.
type ConfImport struct {
	Prompts, Docs, Chunks int
	Model                 bool // the recall vector model
}

// ImportConf writes a character's prompts, recall vector model and
// knowledge documents with their chunks, each document in one
// transaction. What is already stored (a prompt or document of the same
// name, a vector model) is left alone and not counted.
func (s *Store) ImportConf(ctx context.Context, c *history.ConfExport) (ConfImport, error) {
	var n ConfImport
	if err := history.CheckConf(ctx, c.Conf); err != nil {
		return n, err
	}
	failf := func(err error) error { return fmt.Errorf("import conf %q: %w", c.Conf, s.pgErr(err)) }
	for name, text := range c.Prompts {
		tag, err := s.pool.Exec(ctx, `INSERT INTO koe_prompts (conf_uid, name, text) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, c.Conf, name, text)
		if err != nil {
			return n, failf(fmt.Errorf("prompt %q: %w", name, err))
		}
		n.Prompts += int(tag.RowsAffected())
	}
	if c.VectorModel != "" {
		tag, err := s.pool.Exec(ctx, `INSERT INTO koe_recall_models (conf_uid, model) VALUES ($1, $2) ON CONFLICT DO NOTHING`, c.Conf, c.VectorModel)
		if err != nil {
			return n, failf(fmt.Errorf("recall vector model: %w", err))
		}
		n.Model = tag.RowsAffected() > 0
	}
	for _, d := range c.Docs {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO koe_knowledge_docs (conf_uid, doc_id, meta, body) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
				c.Conf, d.ID, d.Meta, d.Text)
			if err != nil || tag.RowsAffected() == 0 {
				return err
			}
			rows := make([][]any, 0, len(d.Chunks))
			for _, ch := range d.Chunks {
				rows = append(rows, []any{c.Conf, d.ID, int64(ch.Seq), ch.Body, ch.Vector})
			}
			if err := copyRows(ctx, tx, "koe_knowledge_local_chunks", []string{"conf_uid", "doc_id", "seq", "body", "vector"}, rows); err != nil {
				return err
			}
			n.Docs++
			n.Chunks += len(d.Chunks)
			return nil
		})
		if err != nil {
			return n, failf(fmt.Errorf("document %q: %w", d.ID, err))
		}
	}
	return n, nil
}
