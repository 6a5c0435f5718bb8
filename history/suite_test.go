package history

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"koe"
	"koe/testkit/pgtest"
)

// The store test suite runs against both backends: a test written as
// func(t, open) gets a fresh store of each kind from open, bbolt always and
// PostgreSQL when KOE_TEST_PG_DSN names a server (scripts/test.sh starts
// one). Each PostgreSQL store lives in a schema of its own, dropped at the
// end, so tests and runs do not see each other's data.

// testStore is what the suite exercises: the methods both stores have.
type testStore interface {
	Create(ctx context.Context, confUID string) (string, error)
	CreateWith(ctx context.Context, confUID, uid string, records ...koe.Record) error
	Append(ctx context.Context, confUID, historyUID string, r koe.Record) error
	Messages(ctx context.Context, confUID, historyUID string) ([]koe.Record, error)
	Since(ctx context.Context, confUID, historyUID string, after uint64, limit int) ([]koe.Record, error)
	List(ctx context.Context, confUID string) ([]koe.ListedHistory, error)
	Delete(ctx context.Context, confUID, historyUID string) error
	Exists(ctx context.Context, confUID, historyUID string) (bool, error)
	LastSeq(ctx context.Context, confUID, historyUID string) (uint64, error)
	Page(ctx context.Context, confUID, historyUID string, before uint64, limit int) ([]koe.Record, bool, error)
	Image(ctx context.Context, confUID, historyUID, ref string) (string, []byte, error)
	AddSummary(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error
	Summaries(ctx context.Context, confUID, historyUID string) ([]koe.SummaryRecord, error)
	SetPrompt(ctx context.Context, confUID, name, text string) error
	Prompt(ctx context.Context, confUID, name string) (string, bool, error)
	Close() error

	// recall
	Confs(ctx context.Context) ([]string, error)
	RecallMarks(ctx context.Context, confUID string) (map[string]koe.RecallMark, error)
	RecallMark(ctx context.Context, confUID, historyUID string) (koe.RecallMark, bool, error)
	SaveRecall(ctx context.Context, confUID, historyUID string, from, mark koe.RecallMark, entries []koe.RecallEntry) ([]koe.RecallEntry, error)
	RecallSince(ctx context.Context, confUID, historyUID string, after uint64, limit int) ([]koe.RecallEntry, error)
	ForgottenRecalls(ctx context.Context, confUID, historyUID string) (map[string][]uint64, error)
	FillRecallVectors(ctx context.Context, confUID, model string, entries []koe.RecallEntry) (int, error)
	SetRecallVectors(ctx context.Context, confUID, model string, entries []koe.RecallEntry) error
	RecallVectorModel(ctx context.Context, confUID string) (string, error)
	ForEachRecall(ctx context.Context, confUID string, fn func(koe.RecallEntry) error) error
	ForgetRecall(ctx context.Context, confUID, historyUID string, seq uint64) (bool, error)
	ForgetRecalls(ctx context.Context, confUID, historyUID string, seqs []uint64) (int, error)
	ClearRecall(ctx context.Context, confUID string) error

	// knowledge
	PutKnowledgeDoc(ctx context.Context, conf string, d koe.KnowledgeDoc, text string, pages []int) error
	KnowledgeDocs(ctx context.Context, conf string) ([]koe.KnowledgeDoc, error)
	KnowledgeText(ctx context.Context, conf, id string) (string, []int, error)
	DeleteKnowledgeDoc(ctx context.Context, conf, id string) (bool, error)
	KnowledgeConfs(ctx context.Context) ([]string, error)
	PutKnowledgeChunks(ctx context.Context, conf, docID string, chunks []koe.KnowledgeChunk) error
	DeleteKnowledgeChunks(ctx context.Context, conf, docID string) error
	ForEachKnowledgeChunk(ctx context.Context, conf string, fn func(koe.KnowledgeChunk) error) error
}

var (
	_ testStore = (*Store)(nil)
	_ testStore = (*PGStore)(nil)
)

// opener opens a fresh, empty store.
type opener func(t testing.TB, opts Options) testStore

// eachBackend runs fn once per backend, as subtests named after them.
func eachBackend(t *testing.T, fn func(t *testing.T, open opener)) {
	t.Run("bbolt", func(t *testing.T) {
		fn(t, func(t testing.TB, opts Options) testStore {
			s, _ := openTest(t, opts)
			return s
		})
	})
	t.Run("postgres", func(t *testing.T) {
		pgtest.DSN(t)
		fn(t, func(t testing.TB, opts Options) testStore {
			return openPGTest(t, opts)
		})
	})
}

// openPGTest opens a PostgreSQL store in a fresh schema, closed when t
// ends.
func openPGTest(t testing.TB, opts Options) *PGStore {
	t.Helper()
	dsn := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := OpenPostgres(ctx, dsn, PGOptions{Now: opts.Now})
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pgDump renders every row of the store's tables, so tests can assert
// that an operation changed nothing.
func pgDump(t *testing.T, s *PGStore) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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

// rawRecords returns a history's stored records as "key json", the key
// being the bbolt key (the big-endian sequence number) in hex.
func rawRecords(t *testing.T, s testStore, conf, uid string) []string {
	t.Helper()
	var vals []string
	switch s := s.(type) {
	case *Store:
		err := s.db.View(func(tx *bolt.Tx) error {
			return messagesBucket(tx, conf, uid).ForEach(func(k, v []byte) error {
				vals = append(vals, fmt.Sprintf("%x %s", k, v))
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	case *PGStore:
		rows, err := s.pool.Query(context.Background(), `SELECT seq, body FROM koe_records WHERE conf_uid = $1 AND uid = $2 ORDER BY seq`, conf, uid)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var seq int64
			var body []byte
			if err := rows.Scan(&seq, &body); err != nil {
				t.Fatal(err)
			}
			k := seqKey(uint64(seq))
			vals = append(vals, fmt.Sprintf("%x %s", k, body))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("rawRecords: unknown store %T", s)
	}
	return vals
}

// checkConsistent runs bbolt's consistency check on a bbolt store
// (PostgreSQL keeps its own consistency: foreign keys tie every row to its
// history).
func checkConsistent(t *testing.T, s testStore) {
	t.Helper()
	ctx := t.Context()
	if b, ok := s.(*Store); ok {
		if err := b.Check(ctx); err != nil {
			t.Fatalf("Check: %v", err)
		}
	}
}

// pgRecallRows counts the rows of history uid of conf in the PostgreSQL
// table standing for a bbolt recall bucket (entries, vectors, forgotten,
// marks).
func pgRecallRows(t *testing.T, s *PGStore, conf string, bucket []byte, uid string) int {
	t.Helper()
	q := map[string]string{
		"entries":   `SELECT count(*) FROM koe_recall_entries WHERE conf_uid = $1 AND uid = $2`,
		"vectors":   `SELECT count(*) FROM koe_recall_entries WHERE conf_uid = $1 AND uid = $2 AND vector IS NOT NULL`,
		"forgotten": `SELECT count(*) FROM koe_recall_forgotten WHERE conf_uid = $1 AND uid = $2`,
		"marks":     `SELECT count(*) FROM koe_recall_marks WHERE conf_uid = $1 AND uid = $2`,
	}[string(bucket)]
	if q == "" {
		t.Fatalf("no table stands for bucket %q", bucket)
	}
	var n int
	if err := s.pool.QueryRow(context.Background(), q, conf, uid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pgRawRecord is a stored record's JSON.
func pgRawRecord(t *testing.T, s *PGStore, conf, uid string, seq uint64) []byte {
	t.Helper()
	var body []byte
	err := s.pool.QueryRow(context.Background(), `SELECT body FROM koe_records WHERE conf_uid = $1 AND uid = $2 AND seq = $3`, conf, uid, int64(seq)).Scan(&body)
	if err != nil {
		t.Fatalf("raw record %d: %v", seq, err)
	}
	return body
}
