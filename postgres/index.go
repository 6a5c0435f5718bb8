package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	"golang.org/x/sync/errgroup"

	"koe/knowledge"
	"koe/textindex"
)

// KnowledgeIndex is knowledge's cluster store (knowledge.store:
// postgres), a knowledge.Index: chunks in PostgreSQL, searched by full
// text (a weighted tsvector under a GIN index) and by cosine similarity
// (pgvector HNSW indexes), the two fused by reciprocal rank. Several koe
// instances may share one database. It has a pool of its own, on the
// database knowledge.dsn names, which may or may not be the store's.
type KnowledgeIndex struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// iterativeScan: pgvector (0.8+) keeps walking its HNSW graph until
	// a filtered search (one character's chunks) has enough rows.
	iterativeScan bool

	mu sync.Mutex
	// dims holds the dimensions known to have their index (see ensureDims).
	dims map[int]bool
}

var _ knowledge.Index = (*KnowledgeIndex)(nil)

// putBatchRows bounds the rows of one INSERT: a 10 MiB document makes some
// 10k chunks, and one statement with all of them would hold them all twice
// in memory, as Go values and as the encoded query.
const putBatchRows = 500

// OpenKnowledgeIndex connects to the database at dsn (a PostgreSQL URL or
// keyword/value string, as libpq and pgx read it; pool settings such as
// pool_max_conns go in it too), creates or migrates the index's schema,
// and returns the index. The database needs the pgvector extension. The
// DSN is never logged nor put in an error: it may hold a password.
func OpenKnowledgeIndex(ctx context.Context, dsn string, log *slog.Logger) (*KnowledgeIndex, error) {
	if log == nil {
		log = slog.Default()
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message names the faulty part without the password.
		return nil, fmt.Errorf("knowledge: postgres: parse dsn: %w", err)
	}
	where := slog.Group("postgres",
		"host", cfg.ConnConfig.Host, "port", cfg.ConnConfig.Port,
		"database", cfg.ConnConfig.Database, "user", cfg.ConnConfig.User)

	// The schema first, on a connection of its own, before the pool
	// opens any.
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("knowledge: postgres: connect: %w", err)
	}
	st, err := migrate(ctx, conn, indexMigrationsTable, indexMigrateLockKey, indexMigrations, extensionHint)
	switch {
	case err != nil:
	case st.Version > st.Known:
		log.Info("knowledge: postgres schema is newer than this koe knows, and compatible with it", where,
			"version", st.Version, "known", st.Known, "compatible_from", st.CompatibleFrom)
	case st.Applied == 0:
		// Nothing to do is the usual start.
		log.Debug("knowledge: postgres schema is current", where, "version", st.Version)
	default:
		log.Info("knowledge: postgres schema migrated", where, "version", st.Version, "applied", st.Applied)
	}
	var vectorVersion string
	var dims []int
	if err == nil {
		vectorVersion, dims, err = readStoreState(ctx, conn)
	}
	closeErr := conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("knowledge: postgres: %w", err)
	}
	if closeErr != nil {
		return nil, fmt.Errorf("knowledge: postgres: close the migration connection: %w", closeErr)
	}

	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("knowledge: postgres: pool: %w", err)
	}
	p := &KnowledgeIndex{
		pool:          pool,
		log:           log,
		iterativeScan: versionAtLeast(vectorVersion, 0, 8),
		dims:          map[int]bool{},
	}
	for _, d := range dims {
		p.dims[d] = true
	}
	log.Info("knowledge: postgres store ready", where, "pgvector", vectorVersion,
		"max_conns", cfg.MaxConns, "embedding_dims", dims)
	return p, nil
}

// readStoreState reads pgvector's version and the dimensions indexed.
func readStoreState(ctx context.Context, conn *pgx.Conn) (vectorVersion string, dims []int, err error) {
	err = conn.QueryRow(ctx, `SELECT extversion FROM pg_extension WHERE extname = 'vector'`).Scan(&vectorVersion)
	if err != nil {
		return "", nil, fmt.Errorf("read pgvector's version: %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT dims FROM koe_knowledge_dims ORDER BY dims`)
	if err != nil {
		return "", nil, fmt.Errorf("read dimensions: %w", err)
	}
	dims, err = pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return "", nil, fmt.Errorf("read dimensions: %w", err)
	}
	return vectorVersion, dims, nil
}

// versionAtLeast reports whether a "major.minor[.patch]" version is at
// least major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	maj, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	mnr := 0
	if len(parts) > 1 {
		mnr, _ = strconv.Atoi(parts[1])
	}
	return maj > major || maj == major && mnr >= minor
}

// Vectors is true: the store ranks by embeddings when a query has one.
func (p *KnowledgeIndex) Vectors() bool { return true }

// Close closes the pool, waiting for connections in use to be released.
func (p *KnowledgeIndex) Close() error {
	p.pool.Close()
	return nil
}

// Len is how many chunks conf has.
func (p *KnowledgeIndex) Len(ctx context.Context, conf string) (int, error) {
	var n int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM koe_knowledge_chunks WHERE conf_uid = $1`, conf).Scan(&n); err != nil {
		return 0, fmt.Errorf("knowledge: postgres: count %s's chunks: %w", conf, err)
	}
	return n, nil
}

// Delete removes every chunk of document docID.
func (p *KnowledgeIndex) Delete(ctx context.Context, conf, docID string) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM koe_knowledge_chunks WHERE conf_uid = $1 AND doc_id = $2`, conf, docID); err != nil {
		return fmt.Errorf("knowledge: postgres: delete document %s of %s: %w", docID, conf, err)
	}
	return nil
}

// Put replaces the chunks of document docID, in one transaction.
func (p *KnowledgeIndex) Put(ctx context.Context, conf, docID string, chunks []knowledge.Chunk) error {
	if conf == "" || docID == "" {
		return errors.New("knowledge: postgres: put: empty conf_uid or document id")
	}
	rows, newDims, err := p.putRows(conf, docID, chunks)
	if err != nil {
		return err
	}
	for _, d := range newDims {
		if err := p.ensureDims(ctx, d); err != nil {
			return err
		}
	}
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// Two Puts of one document at once would each delete the old
		// chunks and then collide inserting the same keys: the second
		// waits for the first instead, and its chunks win.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, docLockKey(conf, docID)); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM koe_knowledge_chunks WHERE conf_uid = $1 AND doc_id = $2`, conf, docID); err != nil {
			return fmt.Errorf("delete old chunks: %w", err)
		}
		for start := 0; start < len(chunks); start += putBatchRows {
			end := min(start+putBatchRows, len(chunks))
			if err := insertChunks(ctx, tx, conf, docID, rows.slice(start, end)); err != nil {
				return fmt.Errorf("insert chunks %d-%d: %w", start, end-1, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("knowledge: postgres: put document %s of %s: %w", docID, conf, err)
	}
	return nil
}

// chunkRows are chunks as columns, the form the INSERT unnests.
type chunkRows struct {
	seq, page, tokens, dims    []int32
	name, title, heading, text []string
	// embedding holds pgvector's text form of each vector ("": none):
	// the simple protocol (see scripts/pglite/server.mjs) knows no
	// vector[] parameters, every protocol knows text[].
	embedding []string
}

func (r chunkRows) slice(i, j int) chunkRows {
	return chunkRows{
		seq: r.seq[i:j], page: r.page[i:j], tokens: r.tokens[i:j], dims: r.dims[i:j],
		name: r.name[i:j], title: r.title[i:j], heading: r.heading[i:j], text: r.text[i:j],
		embedding: r.embedding[i:j],
	}
}

// putRows checks chunks and turns them into columns; it also returns the
// embedding dimensions not yet known to have an index.
func (p *KnowledgeIndex) putRows(conf, docID string, chunks []knowledge.Chunk) (chunkRows, []int, error) {
	n := len(chunks)
	r := chunkRows{
		seq: make([]int32, n), page: make([]int32, n), tokens: make([]int32, n), dims: make([]int32, n),
		name: make([]string, n), title: make([]string, n), heading: make([]string, n), text: make([]string, n),
		embedding: make([]string, n),
	}
	fail := func(i int, format string, args ...any) (chunkRows, []int, error) {
		return chunkRows{}, nil, fmt.Errorf("knowledge: postgres: put document %s of %s: chunk %d: %s", docID, conf, i, fmt.Sprintf(format, args...))
	}
	seen := make(map[int]bool, n)
	var newDims []int
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range chunks {
		if seen[c.Seq] {
			return fail(i, "sequence number %d appears twice", c.Seq)
		}
		seen[c.Seq] = true
		for _, f := range [...]struct{ name, value string }{{"name", c.Name}, {"title", c.Title}, {"heading", c.Heading}, {"text", c.Text}} {
			if !utf8.ValidString(f.value) {
				return fail(i, "its %s is not UTF-8", f.name)
			}
		}
		for _, v := range [...]int{c.Seq, c.Page, c.Tokens} {
			if v < 0 || v > math.MaxInt32 {
				return fail(i, "a number out of range: %d", v)
			}
		}
		r.seq[i], r.page[i], r.tokens[i] = int32(c.Seq), int32(c.Page), int32(c.Tokens)
		// PostgreSQL text cannot hold NUL; in extracted text it is noise.
		r.name[i] = strings.ReplaceAll(c.Name, "\x00", "")
		r.title[i] = strings.ReplaceAll(c.Title, "\x00", "")
		r.heading[i] = strings.ReplaceAll(c.Heading, "\x00", "")
		r.text[i] = strings.ReplaceAll(c.Text, "\x00", "")
		if len(c.Vector) == 0 {
			continue
		}
		if len(c.Vector) > maxDims {
			return fail(i, "its embedding has %d dimensions, more than pgvector's %d", len(c.Vector), maxDims)
		}
		for _, x := range c.Vector {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fail(i, "its embedding holds %v", x)
			}
		}
		r.embedding[i] = pgvector.NewVector(c.Vector).String()
		r.dims[i] = int32(len(c.Vector))
		if d := len(c.Vector); !p.dims[d] && !slices.Contains(newDims, d) {
			newDims = append(newDims, d)
		}
	}
	return r, newDims, nil
}

// insertChunks inserts rows with one statement, whatever their number: the
// columns travel as arrays and unnest turns them back into rows.
func insertChunks(ctx context.Context, tx pgx.Tx, conf, docID string, r chunkRows) error {
	_, err := tx.Exec(ctx, `INSERT INTO koe_knowledge_chunks
			(conf_uid, doc_id, seq, name, title, heading, page, tokens, text, dims, embedding)
		SELECT $1, $2, u.seq, u.name, u.title, u.heading, u.page, u.tokens, u.text, u.dims, nullif(u.embedding, '')::vector
		FROM unnest($3::integer[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::integer[], $9::text[], $10::integer[], $11::text[])
			AS u(seq, name, title, heading, page, tokens, text, dims, embedding)`,
		conf, docID, r.seq, r.name, r.title, r.heading, r.page, r.tokens, r.text, r.dims, r.embedding)
	return err
}

// ensureDims makes sure the HNSW index of a dimension exists (see
// vectorCast), creating it when the dimension is new to the database.
func (p *KnowledgeIndex) ensureDims(ctx context.Context, dims int) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error { return createDimsIndex(ctx, tx, dims) })
	if err != nil {
		return fmt.Errorf("knowledge: postgres: index %d-dimension embeddings: %w", dims, err)
	}
	p.mu.Lock()
	p.dims[dims] = true
	p.mu.Unlock()
	if _, opclass := vectorCast(dims); opclass == "" {
		p.log.Warn("knowledge: postgres: embeddings this large have no index; their searches scan every chunk of the character",
			"dims", dims, "max_indexed_dims", maxHalfvecIndexDims)
	}
	return nil
}

// knownDims reports whether chunks of a dimension may exist: it asks the
// database when this instance has not seen the dimension (another instance
// may have stored it).
func (p *KnowledgeIndex) knownDims(ctx context.Context, dims int) (bool, error) {
	p.mu.Lock()
	known := p.dims[dims]
	p.mu.Unlock()
	if known {
		return true, nil
	}
	if err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM koe_knowledge_dims WHERE dims = $1)`, dims).Scan(&known); err != nil {
		return false, fmt.Errorf("read dimensions: %w", err)
	}
	if known {
		p.mu.Lock()
		p.dims[dims] = true
		p.mu.Unlock()
	}
	return known, nil
}

// docLockKey is the advisory lock key of one document.
func docLockKey(conf, docID string) int64 {
	h := fnv.New64a()
	h.Write([]byte(conf))
	h.Write([]byte{0})
	h.Write([]byte(docID))
	return int64(h.Sum64())
}

// Candidates each ranker contributes to the fusion: deeper lists than the
// hits wanted, so that a chunk ranked well by one ranker and fairly by the
// other is found.
const (
	minCandidates = 20
	maxCandidates = 200
)

// Search ranks conf's chunks by keywords and, when q.Vector is set, by
// cosine similarity, and fuses the two rankings by reciprocal rank. A
// query vector of a dimension no chunk has is ignored (the chunks were
// embedded by another model): the keywords still rank.
func (p *KnowledgeIndex) Search(ctx context.Context, conf string, q knowledge.SearchQuery) ([]knowledge.Hit, error) {
	if q.Limit <= 0 {
		return nil, nil
	}
	useVector := len(q.Vector) > 0
	if useVector {
		known, err := p.knownDims(ctx, len(q.Vector))
		if err != nil {
			return nil, fmt.Errorf("knowledge: postgres: search %s: %w", conf, err)
		}
		if !known {
			p.log.Debug("knowledge: postgres: no chunks have the query embedding's dimension; ranking by keywords",
				"conf_uid", conf, "dims", len(q.Vector))
			useVector = false
		}
	}
	if !useVector {
		hits, err := p.keywordHits(ctx, conf, q.Text, q.Limit)
		if err != nil {
			return nil, fmt.Errorf("knowledge: postgres: search %s: %w", conf, err)
		}
		return keepKeywordBest(hits, hits), nil
	}

	candidates := min(max(q.Limit*4, minCandidates), maxCandidates)
	var keyword, vector []knowledge.Hit
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		keyword, err = p.keywordHits(gctx, conf, q.Text, candidates)
		return err
	})
	g.Go(func() (err error) {
		vector, err = p.vectorHits(gctx, conf, q.Vector, candidates)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("knowledge: postgres: search %s: %w", conf, err)
	}
	return keepKeywordBest(fuseHits(q.Limit, keyword, vector), keyword), nil
}

// keepKeywordBest marks in hits the chunk that ranks first by keywords
// (keyword[0]), and puts it in the last place when fusion left it out:
// the auto router judges a question by it, whatever the vectors did (see
// knowledge.Hit.KeywordBest), and a clear keyword hit is never buried
// out of the answer.
func keepKeywordBest(hits, keyword []knowledge.Hit) []knowledge.Hit {
	if len(keyword) == 0 || len(hits) == 0 {
		return hits
	}
	first := keyword[0]
	for i := range hits {
		if hits[i].DocID == first.DocID && hits[i].Seq == first.Seq {
			hits[i].KeywordBest = true
			return hits
		}
	}
	first.KeywordBest = true
	first.Score = hits[len(hits)-1].Score
	hits[len(hits)-1] = first
	return hits
}

const hitColumns = `doc_id, seq, name, title, heading, page, tokens, text`

// keywordHits ranks by ts_rank. A question is natural language: "what are
// the channel rules?" must find a chunk on rules that never says
// "channel", so the query's terms are OR-ed (plainto_tsquery ANDs them)
// and ts_rank rewards the chunks that match more of them.
func (p *KnowledgeIndex) keywordHits(ctx context.Context, conf, text string, limit int) ([]knowledge.Hit, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	rows, err := p.pool.Query(ctx, `SELECT `+hitColumns+`, ts_rank(tsv, q) AS score
		FROM koe_knowledge_chunks,
			(SELECT replace(plainto_tsquery('english', $2)::text, ' & ', ' | ')::tsquery AS q) AS query
		WHERE conf_uid = $1 AND tsv @@ q
		ORDER BY score DESC, doc_id, seq
		LIMIT $3`, conf, strings.ReplaceAll(text, "\x00", ""), limit)
	if err != nil {
		return nil, fmt.Errorf("keywords: %w", err)
	}
	hits, err := pgx.CollectRows(rows, scanHit)
	if err != nil {
		return nil, fmt.Errorf("keywords: %w", err)
	}
	return hits, nil
}

// vectorSearchSQL ranks by cosine distance through the HNSW index of the
// query's dimension: the cast and the dims predicate are written as the
// index was (see vectorCast), numbers in the SQL, for the planner to use it.
// Its parameters: conf_uid, the query vector, the limit.
func vectorSearchSQL(dims int) string {
	cast, _ := vectorCast(dims)
	return fmt.Sprintf(`SELECT `+hitColumns+`, 1 - (embedding::%[1]s <=> $2::%[1]s) AS score
		FROM koe_knowledge_chunks
		WHERE conf_uid = $1 AND dims = %[2]d
		ORDER BY embedding::%[1]s <=> $2::%[1]s
		LIMIT $3`, cast, dims)
}

func (p *KnowledgeIndex) vectorHits(ctx context.Context, conf string, vec []float32, limit int) ([]knowledge.Hit, error) {
	query := vectorSearchSQL(len(vec))
	var hits []knowledge.Hit
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// An HNSW scan yields ef_search rows before the conf_uid filter:
		// at least as many as wanted, and, with pgvector 0.8+, more
		// until enough pass the filter.
		// (Before 0.8, pgvector refuses the name hnsw.iterative_scan.)
		set := `SELECT set_config('hnsw.ef_search', $1, true)`
		if p.iterativeScan {
			set += `, set_config('hnsw.iterative_scan', 'strict_order', true)`
		}
		if _, err := tx.Exec(ctx, set, strconv.Itoa(max(limit, 40))); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, query, conf, pgvector.NewVector(vec).String(), limit)
		if err != nil {
			return err
		}
		hits, err = pgx.CollectRows(rows, scanHit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	return hits, nil
}

func scanHit(row pgx.CollectableRow) (knowledge.Hit, error) {
	var h knowledge.Hit
	var seq, page, tokens int32
	err := row.Scan(&h.DocID, &seq, &h.Name, &h.Title, &h.Heading, &page, &tokens, &h.Text, &h.Score)
	h.Seq, h.Page, h.Tokens = int(seq), int(page), int(tokens)
	return h, err
}

// fuseHits fuses ranked lists of hits with textindex.Fuse, koe's one
// reciprocal-rank fusion, and returns the best limit, scored by fusion.
func fuseHits(limit int, lists ...[]knowledge.Hit) []knowledge.Hit {
	type key struct {
		doc string
		seq int
	}
	ids := map[key]textindex.DocID{}
	var byID []knowledge.Hit
	ranked := make([][]textindex.Hit, len(lists))
	for i, list := range lists {
		ranked[i] = make([]textindex.Hit, len(list))
		for j, h := range list {
			k := key{h.DocID, h.Seq}
			id, ok := ids[k]
			if !ok {
				id = textindex.DocID(len(byID))
				ids[k] = id
				byID = append(byID, h)
			}
			ranked[i][j] = textindex.Hit{ID: id, Score: h.Score}
		}
	}
	fused := textindex.Fuse(0, ranked...)
	if len(fused) > limit {
		fused = fused[:limit]
	}
	out := make([]knowledge.Hit, len(fused))
	for i, f := range fused {
		out[i] = byID[f.ID]
		out[i].Score = f.Score
	}
	return out
}
