package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"koe/history"
	"koe/history/historytest"
	"koe/testkit/pgtest"
)

// The store contract, on PostgreSQL (KOE_TEST_PG_DSN), each test in a
// schema of its own, dropped at its end.
func TestContract(t *testing.T) {
	pgtest.DSN(t)
	historytest.Run(t, backend)
}

func BenchmarkStoreAppend(b *testing.B) { historytest.BenchAppend(b, backend) }
func BenchmarkStoreLoad1k(b *testing.B) { historytest.BenchLoad1k(b, backend) }
func BenchmarkStoreList(b *testing.B)   { historytest.BenchList(b, backend) }

// openTest opens a store in a fresh schema, closed when t ends.
func openTest(t testing.TB, dsn string, now func() time.Time) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, dsn, Options{Now: now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// backend shows the suite the tables below the methods. Second is
// another pool on the same schema, as a second koe instance has.
var backend = historytest.Backend{
	Open: func(t testing.TB, now func() time.Time) history.Store {
		return openTest(t, pgtest.Schema(t), now)
	},
	Second: func(t testing.TB, s history.Store, now func() time.Time) history.Store {
		return openTest(t, s.(*Store).pool.Config().ConnString(), now)
	},
	Dump:       func(t testing.TB, s history.Store) string { return dump(t, s.(*Store)) },
	Records:    records,
	RecallRows: recallRows,
}

// dump renders every row of the store's tables.
func dump(t testing.TB, s *Store) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	for _, q := range []string{
		`SELECT conf_uid, uid, last_seq FROM koe_histories ORDER BY 1, 2`,
		`SELECT conf_uid, uid, seq, kind, encode(body, 'escape') FROM koe_records ORDER BY 1, 2, 3`,
		`SELECT conf_uid, uid, seq, idx, encode(data, 'hex') FROM koe_record_images ORDER BY 1, 2, 3, 4`,
		`SELECT conf_uid, uid, first_turn, encode(body, 'escape') FROM koe_summaries ORDER BY 1, 2, 3`,
		`SELECT conf_uid, name, encode(text, 'escape') FROM koe_prompts ORDER BY 1, 2`,
		`SELECT conf_uid, uid, seq, encode(body, 'escape'), encode(vector, 'hex') FROM koe_recall_entries ORDER BY 1, 2, 3`,
		`SELECT conf_uid, uid, seq FROM koe_recall_forgotten ORDER BY 1, 2, 3`,
		`SELECT conf_uid, uid, encode(body, 'escape') FROM koe_recall_marks ORDER BY 1, 2`,
		`SELECT conf_uid, model FROM koe_recall_models ORDER BY 1`,
		`SELECT conf_uid, doc_id, encode(meta, 'escape'), encode(body, 'escape') FROM koe_knowledge_docs ORDER BY 1, 2`,
		`SELECT conf_uid, doc_id, seq, encode(body, 'escape'), encode(vector, 'hex') FROM koe_knowledge_local_chunks ORDER BY 1, 2, 3`,
	} {
		rows, err := s.pool.Query(ctx, q)
		if err != nil {
			t.Fatalf("dump: %v", err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatalf("dump: %v", err)
			}
			fmt.Fprintln(&b, vals...)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatalf("dump: %v", err)
		}
	}
	return b.String()
}

// records reads a history's rows of koe_records.
func records(t testing.TB, st history.Store, conf, uid string) []historytest.Stored {
	t.Helper()
	s := st.(*Store)
	rows, err := s.pool.Query(t.Context(), `SELECT seq, body FROM koe_records WHERE conf_uid = $1 AND uid = $2 ORDER BY seq`, conf, uid)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []historytest.Stored
	for rows.Next() {
		var seq int64
		var body []byte
		if err := rows.Scan(&seq, &body); err != nil {
			t.Fatal(err)
		}
		out = append(out, historytest.Stored{Seq: uint64(seq), Body: body})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// recallRows counts the rows of a history in the table standing for what
// the suite asks about.
func recallRows(t testing.TB, st history.Store, conf, what, uid string) int {
	t.Helper()
	q := map[string]string{
		"entries":   `SELECT count(*) FROM koe_recall_entries WHERE conf_uid = $1 AND uid = $2`,
		"vectors":   `SELECT count(*) FROM koe_recall_entries WHERE conf_uid = $1 AND uid = $2 AND vector IS NOT NULL`,
		"forgotten": `SELECT count(*) FROM koe_recall_forgotten WHERE conf_uid = $1 AND uid = $2`,
		"marks":     `SELECT count(*) FROM koe_recall_marks WHERE conf_uid = $1 AND uid = $2`,
	}[what]
	if q == "" {
		t.Fatalf("no table stands for %q", what)
	}
	var n int
	if err := st.(*Store).pool.QueryRow(t.Context(), q, conf, uid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
