package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"koe"
	"koe/history"
)

// Knowledge documents and the local knowledge index's chunks.

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
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err = s.pool.Exec(ctx, `
		INSERT INTO koe_knowledge_docs (conf_uid, doc_id, meta, body) VALUES ($1, $2, $3, $4)
		ON CONFLICT (conf_uid, doc_id) DO UPDATE SET meta = excluded.meta, body = excluded.body`,
		conf, d.ID, meta, body)
	if err != nil {
		return fmt.Errorf("put document %q of conf %q: %w", d.ID, conf, s.pgErr(err))
	}
	return nil
}

// KnowledgeDocs lists a conf's documents, oldest first.
func (s *Store) KnowledgeDocs(ctx context.Context, conf string) ([]koe.KnowledgeDoc, error) {
	if err := history.CheckConf(ctx, conf); err != nil {
		return nil, err
	}
	failf := func(err error) error { return fmt.Errorf("list documents of conf %q: %w", conf, err) }
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT doc_id, meta FROM koe_knowledge_docs WHERE conf_uid = $1 ORDER BY doc_id COLLATE "C"`, conf)
	if err != nil {
		return nil, failf(s.pgErr(err))
	}
	defer rows.Close()
	out := []koe.KnowledgeDoc{}
	for rows.Next() {
		var id string
		var meta []byte
		if err := rows.Scan(&id, &meta); err != nil {
			return nil, failf(err)
		}
		d, err := history.DecodeDoc(id, meta)
		if err != nil {
			return nil, failf(err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, failf(s.pgErr(err))
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
	ctx, cancel := s.op(ctx)
	defer cancel()
	var body []byte
	err = s.pool.QueryRow(ctx, `SELECT body FROM koe_knowledge_docs WHERE conf_uid = $1 AND doc_id = $2`, conf, id).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		err = koe.ErrNotFound
	}
	if err == nil {
		text, pages, err = history.DecodeText(body)
	}
	if err != nil {
		return "", nil, fmt.Errorf("read text of document %q of conf %q: %w", id, conf, s.pgErr(err))
	}
	return text, pages, nil
}

// DeleteKnowledgeDoc removes a document, its text and its chunks, in one
// statement, and reports whether there was anything to remove.
func (s *Store) DeleteKnowledgeDoc(ctx context.Context, conf, id string) (bool, error) {
	if err := history.CheckDoc(ctx, conf, id); err != nil {
		return false, err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var n int
	err := s.pool.QueryRow(ctx, `
		WITH d AS (
			DELETE FROM koe_knowledge_docs WHERE conf_uid = $1 AND doc_id = $2 RETURNING 1
		), c AS (
			DELETE FROM koe_knowledge_local_chunks WHERE conf_uid = $1 AND doc_id = $2 RETURNING 1
		)
		SELECT (SELECT count(*) FROM d) + (SELECT count(*) FROM c)`, conf, id).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("delete document %q of conf %q: %w", id, conf, s.pgErr(err))
	}
	return n > 0, nil
}

// KnowledgeConfs lists the confs that have a knowledge base: documents,
// or chunks of documents.
func (s *Store) KnowledgeConfs(ctx context.Context) ([]string, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT conf_uid COLLATE "C" FROM koe_knowledge_docs
		UNION
		SELECT conf_uid COLLATE "C" FROM koe_knowledge_local_chunks
		ORDER BY 1`)
	if err == nil {
		var out []string
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil {
			return out, nil
		}
	}
	return nil, fmt.Errorf("list confs with knowledge: %w", s.pgErr(err))
}

// PutKnowledgeChunks replaces every chunk of a document with chunks, in one
// transaction. A chunk's DocID must be docID or empty; seqs must be
// distinct and fit in 32 bits.
func (s *Store) PutKnowledgeChunks(ctx context.Context, conf, docID string, chunks []koe.KnowledgeChunk) error {
	if err := history.CheckDoc(ctx, conf, docID); err != nil {
		return err
	}
	bodies, err := history.EncodeChunks(conf, docID, chunks)
	if err != nil {
		return err
	}
	var rows vectoredRows
	for i, c := range chunks {
		var vec []float32
		if len(c.Vector) > 0 {
			vec = c.Vector
		}
		rows.add(int64(c.Seq), bodies[i], vec)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM koe_knowledge_local_chunks WHERE conf_uid = $1 AND doc_id = $2`, conf, docID); err != nil {
			return fmt.Errorf("drop chunks: %w", err)
		}
		if err := localChunks.upsert(ctx, tx, conf, docID, rows); err != nil {
			return fmt.Errorf("put chunks: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put chunks of document %q of conf %q: %w", docID, conf, s.pgErr(err))
	}
	return nil
}

// DeleteKnowledgeChunks removes every chunk of a document (none: no error).
func (s *Store) DeleteKnowledgeChunks(ctx context.Context, conf, docID string) error {
	return s.PutKnowledgeChunks(ctx, conf, docID, nil)
}

// ForEachKnowledgeChunk calls fn with every chunk of a conf, with its
// vector, in document (byte order of ids) and sequence order. fn must not
// call the store.
func (s *Store) ForEachKnowledgeChunk(ctx context.Context, conf string, fn func(koe.KnowledgeChunk) error) error {
	if err := history.CheckConf(ctx, conf); err != nil {
		return err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	err := eachVectored(ctx, s, localChunks, conf, func(id string, seq int64, c koe.KnowledgeChunk, vec []float32) error {
		c.DocID, c.Seq, c.Vector = id, int(seq), vec
		return fn(c)
	})
	if err != nil {
		return fmt.Errorf("read chunks of conf %q: %w", conf, err)
	}
	return nil
}
