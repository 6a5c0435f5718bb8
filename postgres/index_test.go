package postgres

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"koe/knowledge"
	"koe/testkit/pglitetest"
)

// TestMain stops the PGlite server the knowledge index's tests may have
// started (see testkit/pglitetest).
func TestMain(m *testing.M) {
	code := m.Run()
	pglitetest.Stop()
	os.Exit(code)
}

// pgHangGuard bounds a test's database calls; only a hang reaches it.
const pgHangGuard = 2 * time.Minute

func pgContext(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), pgHangGuard)
	tb.Cleanup(cancel)
	return ctx
}

var confCounter atomic.Int64

// testConf is a conf_uid of the test's own, so that tests sharing one
// database do not see each other's chunks; they are removed at cleanup.
func testConf(tb testing.TB, p *KnowledgeIndex) string {
	conf := fmt.Sprintf("%s-%d-%d", tb.Name(), time.Now().UnixNano(), confCounter.Add(1))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), pgHangGuard)
		defer cancel()
		if _, err := p.pool.Exec(ctx, `DELETE FROM koe_knowledge_chunks WHERE conf_uid = $1`, conf); err != nil {
			tb.Errorf("clean up %s: %v", conf, err)
		}
	})
	return conf
}

func openTestIndex(tb testing.TB) *KnowledgeIndex {
	tb.Helper()
	dsn := pglitetest.DSN(tb)
	p, err := OpenKnowledgeIndex(pgContext(tb), dsn, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// axis is a unit vector of dims dimensions along axis i, tilted a little
// towards axis j by w: vectors on one axis are near, on two axes far.
func axis(dims, i, j int, w float32) []float32 {
	v := make([]float32, dims)
	v[i] = 1
	v[j] += w
	n := float32(math.Sqrt(float64(1 + w*w)))
	for k := range v {
		v[k] /= n
	}
	return v
}

func chunk(seq int, heading, text string) knowledge.Chunk {
	return knowledge.Chunk{Seq: seq, Name: "doc.md", Title: "Doc", Heading: heading, Text: text, Tokens: len(strings.Fields(text))}
}

func hitKeys(hits []knowledge.Hit) []string {
	keys := make([]string, len(hits))
	for i, h := range hits {
		keys[i] = fmt.Sprintf("%s/%d", h.DocID, h.Seq)
	}
	return keys
}

func pgPut(tb testing.TB, p *KnowledgeIndex, conf, doc string, chunks ...knowledge.Chunk) {
	tb.Helper()
	if err := p.Put(pgContext(tb), conf, doc, chunks); err != nil {
		tb.Fatal(err)
	}
}

func pgSearch(tb testing.TB, p *KnowledgeIndex, conf string, q knowledge.SearchQuery) []knowledge.Hit {
	tb.Helper()
	hits, err := p.Search(pgContext(tb), conf, q)
	if err != nil {
		tb.Fatal(err)
	}
	return hits
}

func pgLen(tb testing.TB, p *KnowledgeIndex, conf string) int {
	tb.Helper()
	n, err := p.Len(pgContext(tb), conf)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func TestIndexOpenMigratesOnce(t *testing.T) {
	dsn := pglitetest.DSN(t)
	ctx := pgContext(t)
	// Instances starting together: each waits for the other's lock, and
	// every version is applied once.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			p, err := OpenKnowledgeIndex(ctx, dsn, slog.New(slog.DiscardHandler))
			if err == nil {
				_ = p.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	p := openTestIndex(t) // and once more, on a current schema
	rows, err := p.pool.Query(ctx, `SELECT version FROM koe_schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != len(indexMigrations) {
		t.Fatalf("versions recorded: %v, want 1..%d", versions, len(indexMigrations))
	}
	for i, v := range versions {
		if int(v) != i+1 {
			t.Fatalf("versions recorded: %v, want 1..%d", versions, len(indexMigrations))
		}
	}
}

func TestIndexPutSearchReplaceDelete(t *testing.T) {
	p := openTestIndex(t)
	conf := testConf(t, p)
	pgPut(t, p, conf, "rules",
		chunk(0, "Channel rules", "Be kind to everyone in chat. No spam, no links without asking."),
		chunk(1, "Schedule", "Streams start at eight in the evening on weekdays."),
	)
	pgPut(t, p, conf, "lore",
		chunk(0, "The dragon", "The dragon sleeps under the mountain and hoards copper coins."),
	)
	if n := pgLen(t, p, conf); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}
	hits := pgSearch(t, p, conf, knowledge.SearchQuery{Text: "when do the streams start?", Limit: 5})
	if got := hitKeys(hits); len(got) != 1 || got[0] != "rules/1" {
		t.Fatalf("hits %v, want rules/1", got)
	}
	h := hits[0]
	if h.Heading != "Schedule" || h.Name != "doc.md" || h.Title != "Doc" || !strings.Contains(h.Text, "eight in the evening") || h.Tokens == 0 || h.Score <= 0 {
		t.Fatalf("hit %+v", h)
	}

	// Re-ingesting replaces every chunk of the document.
	pgPut(t, p, conf, "rules", chunk(0, "Channel rules", "Only English in chat, please."))
	if n := pgLen(t, p, conf); n != 2 {
		t.Fatalf("Len after replace = %d, want 2", n)
	}
	if hits := pgSearch(t, p, conf, knowledge.SearchQuery{Text: "streams start evening", Limit: 5}); len(hits) != 0 {
		t.Fatalf("a replaced chunk is found: %v", hitKeys(hits))
	}
	if got := hitKeys(pgSearch(t, p, conf, knowledge.SearchQuery{Text: "english", Limit: 5})); len(got) != 1 || got[0] != "rules/0" {
		t.Fatalf("hits %v, want the new rules/0", got)
	}

	// An empty Put removes, Delete removes, deleting nothing is no error.
	pgPut(t, p, conf, "rules")
	if err := p.Delete(pgContext(t), conf, "lore"); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(pgContext(t), conf, "lore"); err != nil {
		t.Fatal(err)
	}
	if n := pgLen(t, p, conf); n != 0 {
		t.Fatalf("Len after delete = %d, want 0", n)
	}
	if hits := pgSearch(t, p, conf, knowledge.SearchQuery{Text: "dragon", Limit: 5}); len(hits) != 0 {
		t.Fatalf("a deleted chunk is found: %v", hitKeys(hits))
	}
}

func TestIndexConfIsolation(t *testing.T) {
	p := openTestIndex(t)
	alice, bob := testConf(t, p), testConf(t, p)
	pgPut(t, p, alice, "same-id", knowledge.Chunk{Seq: 0, Name: "a.md", Title: "A", Text: "Alice's secret garden", Vector: axis(64, 0, 1, 0)})
	pgPut(t, p, bob, "same-id", knowledge.Chunk{Seq: 0, Name: "b.md", Title: "B", Text: "Bob's secret workshop", Vector: axis(64, 0, 1, 0)})
	for _, q := range []knowledge.SearchQuery{
		{Text: "secret", Limit: 10},
		{Text: "secret", Vector: axis(64, 0, 1, 0), Limit: 10},
	} {
		hits := pgSearch(t, p, alice, q)
		if len(hits) != 1 || hits[0].Name != "a.md" {
			t.Fatalf("alice's search (vector %v) found %+v", q.Vector != nil, hits)
		}
	}
	if err := p.Delete(pgContext(t), alice, "same-id"); err != nil {
		t.Fatal(err)
	}
	if pgLen(t, p, alice) != 0 || pgLen(t, p, bob) != 1 {
		t.Fatal("deleting alice's document touched bob's")
	}
}

// A question in natural language finds chunks that hold only some of its
// words.
func TestIndexKeywordQuestion(t *testing.T) {
	p := openTestIndex(t)
	conf := testConf(t, p)
	pgPut(t, p, conf, "handbook",
		chunk(0, "Rules", "Moderators remove spam. Repeated rule breaking means a ban."),
		chunk(1, "Equipment", "The microphone is a dynamic cardioid."),
		chunk(2, "Channel rules", "Rules for the channel: be kind, no spoilers."),
	)
	hits := pgSearch(t, p, conf, knowledge.SearchQuery{Text: "what are the channel rules?", Limit: 5})
	got := hitKeys(hits)
	// Both rule chunks; the one that also says "channel" first.
	if len(got) != 2 || got[0] != "handbook/2" || got[1] != "handbook/0" {
		t.Fatalf("hits %v, want handbook/2 then handbook/0", got)
	}
	// Only stop words: nothing to rank by, and no error.
	if hits := pgSearch(t, p, conf, knowledge.SearchQuery{Text: "what is it?", Limit: 5}); len(hits) != 0 {
		t.Fatalf("stop words found %v", hitKeys(hits))
	}
	// Characters tsquery would read as operators are words here.
	if _, err := p.Search(pgContext(t), conf, knowledge.SearchQuery{Text: "rules & | ! ( ) <-> : * ' \"", Limit: 5}); err != nil {
		t.Fatal(err)
	}
}

// A heading's words weigh more than the text's.
func TestIndexKeywordWeights(t *testing.T) {
	p := openTestIndex(t)
	conf := testConf(t, p)
	pgPut(t, p, conf, "doc",
		chunk(0, "Introduction", "We talk about pottery now and then."),
		chunk(1, "Pottery", "We talk about it now and then."),
	)
	if got := hitKeys(pgSearch(t, p, conf, knowledge.SearchQuery{Text: "pottery", Limit: 5})); len(got) != 2 || got[0] != "doc/1" {
		t.Fatalf("hits %v, want doc/1 (pottery in its heading) first", got)
	}
}

// A chunk only the vectors find is lifted into the hits, above a chunk
// only the keywords find, and below one both find.
func TestIndexHybridLiftsVectorOnly(t *testing.T) {
	p := openTestIndex(t)
	conf := testConf(t, p)
	const dims = 64
	query := "what do subscribers get? emotes?"
	qvec := axis(dims, 0, 1, 0.1)
	a := chunk(0, "", "Subscribers get emotes and the chat badge, emotes everywhere.")
	a.Vector = axis(dims, 0, 1, 0.5)
	b := chunk(1, "", "Emotes are reviewed by moderators.")
	b.Vector = axis(dims, 60, 61, 0)
	c := chunk(2, "", "Supporters of the stream receive little pictures to use in messages.")
	c.Vector = qvec
	chunks := []knowledge.Chunk{a, b, c}
	// Chunks nearer the query than b by vector, so many that b is not
	// among the vector ranker's candidates.
	for i := range maxCandidates / 4 {
		f := chunk(3+i, "", fmt.Sprintf("Filler paragraph %d about nothing much.", i))
		f.Vector = axis(dims, 0, 2+i%50, 1+float32(i)/10)
		chunks = append(chunks, f)
	}
	pgPut(t, p, conf, "faq", chunks...)

	keyword := hitKeys(pgSearch(t, p, conf, knowledge.SearchQuery{Text: query, Limit: 3}))
	if strings.Join(keyword, " ") != "faq/0 faq/1" {
		t.Fatalf("keyword hits %v, want faq/0 faq/1", keyword)
	}
	hybrid := hitKeys(pgSearch(t, p, conf, knowledge.SearchQuery{Text: query, Vector: qvec, Limit: 3}))
	// a: 1st by keywords, 2nd by vector; c: 1st by vector only; b: 2nd by
	// keywords only.
	if strings.Join(hybrid, " ") != "faq/0 faq/2 faq/1" {
		t.Fatalf("hybrid hits %v, want faq/0 faq/2 faq/1", hybrid)
	}
}

// Chunks embedded by two models (two dimensions) live side by side, each
// searched through its own index.
func TestIndexTwoDimensions(t *testing.T) {
	p := openTestIndex(t)
	conf := testConf(t, p)
	old := chunk(0, "", "Tea ceremony steps")
	old.Vector = axis(48, 3, 4, 0)
	pgPut(t, p, conf, "old-model", old)
	fresh := chunk(0, "", "Coffee brewing steps")
	fresh.Vector = axis(96, 7, 8, 0)
	pgPut(t, p, conf, "new-model", fresh)
	// A search by vector only (no keyword matches).
	for _, tc := range []struct {
		vec  []float32
		want string
	}{{axis(48, 3, 4, 0), "old-model/0"}, {axis(96, 7, 8, 0), "new-model/0"}} {
		got := hitKeys(pgSearch(t, p, conf, knowledge.SearchQuery{Text: "zzz", Vector: tc.vec, Limit: 5}))
		if len(got) != 1 || got[0] != tc.want {
			t.Fatalf("%d-dim search: %v, want %s", len(tc.vec), got, tc.want)
		}
	}
	// The planner can answer both through their HNSW indexes.
	for _, dims := range []int{48, 96} {
		plan := explainVectorSearch(t, p, conf, dims)
		if !strings.Contains(plan, dimsIndexName(dims)) {
			t.Fatalf("the %d-dim search does not use %s:\n%s", dims, dimsIndexName(dims), plan)
		}
	}
}

// explainVectorSearch is the plan of a vector search with the other ways
// of answering it made dear (a few rows would make a scan cheapest).
func explainVectorSearch(t *testing.T, p *KnowledgeIndex, conf string, dims int) string {
	t.Helper()
	ctx := pgContext(t)
	var plan strings.Builder
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		for _, set := range []string{"enable_seqscan", "enable_bitmapscan", "enable_sort"} {
			if _, err := tx.Exec(ctx, `SELECT set_config($1, 'off', true)`, set); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `EXPLAIN `+vectorSearchSQL(dims), conf, pgvector.NewVector(axis(dims, 0, 1, 0)).String(), 5)
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		plan.WriteString(strings.Join(lines, "\n"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return plan.String()
}

// A query embedded by a model no chunk was embedded with ranks by keywords.
func TestIndexDimensionMismatch(t *testing.T) {
	p := openTestIndex(t)
	conf, other := testConf(t, p), testConf(t, p)
	c := chunk(0, "", "The lighthouse keeper logs every ship.")
	c.Vector = axis(64, 0, 1, 0)
	pgPut(t, p, conf, "log", c, chunk(1, "", "Ships pass at night."))
	o := chunk(0, "", "Another character's chunk")
	o.Vector = axis(40, 0, 1, 0)
	pgPut(t, p, other, "x", o)
	keyword := hitKeys(pgSearch(t, p, conf, knowledge.SearchQuery{Text: "ship keeper", Limit: 5}))
	if len(keyword) != 2 {
		t.Fatalf("keyword hits %v", keyword)
	}
	// 32: no chunk anywhere; 40: only another character's chunks.
	for _, dims := range []int{32, 40} {
		got := hitKeys(pgSearch(t, p, conf, knowledge.SearchQuery{Text: "ship keeper", Vector: axis(dims, 0, 1, 0), Limit: 5}))
		if strings.Join(got, " ") != strings.Join(keyword, " ") {
			t.Fatalf("%d-dim query: %v, want the keyword hits %v", dims, got, keyword)
		}
	}
}

func TestIndexPutRefusesBadChunks(t *testing.T) {
	p := openTestIndex(t)
	conf := testConf(t, p)
	pgPut(t, p, conf, "doc", chunk(0, "", "kept"))
	nan := chunk(0, "", "x")
	nan.Vector = []float32{1, float32(math.NaN())}
	for name, chunks := range map[string][]knowledge.Chunk{
		"duplicate seq": {chunk(0, "", "a"), chunk(0, "", "b")},
		"NaN":           {nan},
		"not UTF-8":     {chunk(0, "", "bad \xff byte")},
		"negative seq":  {chunk(-1, "", "x")},
	} {
		if err := p.Put(pgContext(t), conf, "doc", chunks); err == nil {
			t.Errorf("%s: Put succeeded", name)
		}
	}
	if got := hitKeys(pgSearch(t, p, conf, knowledge.SearchQuery{Text: "kept", Limit: 5})); len(got) != 1 {
		t.Fatalf("a refused Put changed the document: %v", got)
	}
	// NUL cannot be stored in PostgreSQL text: it is dropped.
	pgPut(t, p, conf, "nul", chunk(0, "", "nul\x00byte"))
	if got := pgSearch(t, p, conf, knowledge.SearchQuery{Text: "nulbyte", Limit: 5}); len(got) != 1 || got[0].Text != "nulbyte" {
		t.Fatalf("NUL text: %+v", got)
	}
}

// Many chunks go in several INSERTs of one transaction.
func TestIndexPutManyChunks(t *testing.T) {
	p := openTestIndex(t)
	conf := testConf(t, p)
	n := putBatchRows*2 + 7
	chunks := make([]knowledge.Chunk, n)
	for i := range chunks {
		chunks[i] = chunk(i, "", fmt.Sprintf("chunk number %d of the long document", i))
		chunks[i].Vector = axis(64, i%64, (i+1)%64, 0.3)
	}
	chunks[n-1].Text = "the very last chunk mentions zebras"
	pgPut(t, p, conf, "long", chunks...)
	if got := pgLen(t, p, conf); got != n {
		t.Fatalf("Len = %d, want %d", got, n)
	}
	hits := pgSearch(t, p, conf, knowledge.SearchQuery{Text: "zebras", Limit: 1})
	if len(hits) != 1 || hits[0].Seq != n-1 {
		t.Fatalf("hits %+v", hits)
	}
}

// Puts of one document at once each replace it whole: the chunks left are
// all of one Put.
func TestIndexConcurrent(t *testing.T) {
	p := openTestIndex(t)
	conf := testConf(t, p)
	ctx := pgContext(t)
	const writers, rounds = 4, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				version := fmt.Sprintf("w%dr%d", w, r)
				chunks := make([]knowledge.Chunk, 3+w)
				for i := range chunks {
					chunks[i] = chunk(i, "", "shared document version "+version)
					chunks[i].Vector = axis(64, w, i, 0.2)
				}
				if err := p.Put(ctx, conf, "shared", chunks); err != nil {
					t.Error(err)
					return
				}
				if err := p.Put(ctx, conf, "own-"+version, chunks[:1]); err != nil {
					t.Error(err)
					return
				}
				if _, err := p.Search(ctx, conf, knowledge.SearchQuery{Text: "shared document", Vector: axis(64, w, 0, 0), Limit: 5}); err != nil {
					t.Error(err)
					return
				}
				if err := p.Delete(ctx, conf, "own-"+version); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	hits := pgSearch(t, p, conf, knowledge.SearchQuery{Text: "shared document version", Limit: 100})
	if len(hits) == 0 {
		t.Fatal("the shared document is gone")
	}
	version := hits[0].Text
	var w int
	if _, err := fmt.Sscanf(version, "shared document version w%d", &w); err != nil {
		t.Fatal(err)
	}
	if len(hits) != 3+w {
		t.Fatalf("%d chunks left, want the %d of one Put", len(hits), 3+w)
	}
	for _, h := range hits {
		if h.Text != version {
			t.Fatalf("chunks of two Puts mixed: %q and %q", version, h.Text)
		}
	}
	if n := pgLen(t, p, conf); n != len(hits) {
		t.Fatalf("Len = %d, want %d", n, len(hits))
	}
}

// The DSN may hold a password: it is in no error and no log line.
func TestIndexDSNNotDisclosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	const secret = "s3cret-Passw0rd"
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, dsn := range []string{
		"postgres://koe:" + secret + "@" + closed + "/koe?sslmode=disable",
		"host=127.0.0.1 port=" + strings.Split(closed, ":")[1] + " user=koe password=" + secret + " sslmode=disable",
		"postgres://koe:" + secret + "@" + closed + "/koe?sslmode=disable&pool_max_conns=many",
	} {
		_, err := OpenKnowledgeIndex(pgContext(t), dsn, log)
		if err == nil {
			t.Fatalf("opened a closed port")
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the error shows the password: %v", err)
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("the log shows the password: %s", logs.String())
	}
}
