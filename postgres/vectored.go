package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"koe/history"
)

// Text plus vector keyed by owner and sequence: recall's entries (each
// owned by a history) and the local knowledge index's chunks (each owned
// by a document) are both tables of rows (conf_uid, owner, seq, body,
// vector), body a JSON value and vector its embedding as
// history.EncodeVector writes it (NULL: none).
type vectoredTable struct {
	// name and owner are the table and its owner column: constants, put
	// in the SQL as they are.
	name, owner string
	// what names a row, for errors.
	what string
}

var (
	recallEntries = vectoredTable{name: "koe_recall_entries", owner: "uid", what: "recall entry"}
	localChunks   = vectoredTable{name: "koe_knowledge_local_chunks", owner: "doc_id", what: "chunk"}
)

// vectoredRows are rows of one owner to write, as the columns unnest reads.
type vectoredRows struct {
	seqs    []int64
	bodies  [][]byte
	vectors [][]byte
	at      map[int64]int // the index of each seq
}

// add adds a row. The last row of a seq wins, as the bbolt store's last
// write of a key does; a row without a vector keeps the one before it.
func (r *vectoredRows) add(seq int64, body []byte, vec []float32) {
	var v []byte
	if vec != nil {
		v = history.EncodeVector(vec)
	}
	if i, ok := r.at[seq]; ok {
		r.bodies[i] = body
		if v != nil {
			r.vectors[i] = v
		}
		return
	}
	if r.at == nil {
		r.at = map[int64]int{}
	}
	r.at[seq] = len(r.seqs)
	r.seqs = append(r.seqs, seq)
	r.bodies = append(r.bodies, body)
	r.vectors = append(r.vectors, v)
}

// upsert writes rows of owner in tx, in one statement. A row already
// stored gets the new body, and the new vector when the row has one.
func (t vectoredTable) upsert(ctx context.Context, tx pgx.Tx, conf, owner string, r vectoredRows) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO `+t.name+` (conf_uid, `+t.owner+`, seq, body, vector)
		SELECT $1, $2, r.seq, r.body, r.vector FROM unnest($3::bigint[], $4::bytea[], $5::bytea[]) AS r(seq, body, vector)
		ON CONFLICT (conf_uid, `+t.owner+`, seq) DO UPDATE
		SET body = excluded.body, vector = coalesce(excluded.vector, `+t.name+`.vector)`,
		conf, owner, r.seqs, r.bodies, r.vectors)
	return err
}

// eachVectored calls fn with every row of conf in t, its body decoded as
// T, by owner (byte order) and seq. fn must not call the store.
func eachVectored[T any](ctx context.Context, s *Store, t vectoredTable, conf string, fn func(owner string, seq int64, v T, vec []float32) error) error {
	rows, err := s.pool.Query(ctx, `
		SELECT `+t.owner+`, seq, body, vector FROM `+t.name+`
		WHERE conf_uid = $1 ORDER BY `+t.owner+` COLLATE "C", seq`, conf)
	if err != nil {
		return s.pgErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var owner string
		var seq int64
		var body, vec []byte
		if err := rows.Scan(&owner, &seq, &body, &vec); err != nil {
			return err
		}
		var v T
		if err := json.Unmarshal(body, &v); err != nil {
			return fmt.Errorf("decode %s %s/%d: %w", t.what, owner, seq, err)
		}
		if err := fn(owner, seq, v, history.DecodeVector(vec)); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return s.pgErr(err)
	}
	return nil
}
