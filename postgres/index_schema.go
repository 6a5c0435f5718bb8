package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The knowledge index's schema: the operator provides pgvector too (see
// migration 1).

// indexMigrationsTable records the versions applied to the database.
const indexMigrationsTable = "koe_schema_migrations"

// indexMigrateLockKey is the pg_advisory_xact_lock key that serializes koe
// instances migrating one database at once (any fixed number: it only has
// to be koe's own).
const indexMigrateLockKey int64 = 0x6b6f655f6d696772 // "koe_migr"

// indexMigrations is the knowledge index's schema, oldest first.
var indexMigrations = []migration{
	{
		Version: 1,
		Name:    "knowledge chunks with full-text and vector search",
		Statements: []string{
			// pgvector is not a trusted extension: only a superuser may
			// create it. When koe's role may not, an administrator runs
			// CREATE EXTENSION vector once and this is a no-op.
			`CREATE EXTENSION IF NOT EXISTS vector`,
			// One row per chunk. dims is the embedding's dimension (0: no
			// embedding): the embedding column has no fixed dimension, so
			// that one table holds chunks embedded by different models;
			// see ensureDims for how they are indexed.
			`CREATE TABLE koe_knowledge_chunks (
				conf_uid  text    NOT NULL,
				doc_id    text    NOT NULL,
				seq       integer NOT NULL,
				name      text    NOT NULL,
				title     text    NOT NULL,
				heading   text    NOT NULL,
				page      integer NOT NULL,
				tokens    integer NOT NULL,
				text      text    NOT NULL,
				dims      integer NOT NULL,
				embedding vector,
				-- A heading says what its chunk is about and a title what its
				-- document is: a word found there counts more than in the text.
				tsv tsvector GENERATED ALWAYS AS (
					setweight(to_tsvector('english', heading), 'A') ||
					setweight(to_tsvector('english', title), 'B') ||
					setweight(to_tsvector('english', text), 'D')
				) STORED,
				PRIMARY KEY (conf_uid, doc_id, seq),
				CHECK (dims >= 0),
				CHECK ((embedding IS NULL) = (dims = 0)),
				CHECK (embedding IS NULL OR vector_dims(embedding) = dims)
			)`,
			`CREATE INDEX koe_knowledge_chunks_tsv ON koe_knowledge_chunks USING gin (tsv)`,
			// The dimensions that have an HNSW index, one row each.
			`CREATE TABLE koe_knowledge_dims (
				dims       integer PRIMARY KEY CHECK (dims > 0),
				created_at timestamptz NOT NULL DEFAULT now()
			)`,
		},
	},
}

// extensionHint says what to do when pgvector cannot be created.
func extensionHint(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return ""
	}
	switch pgErr.Code {
	case "42501": // insufficient_privilege
		return " (pgvector must be created by a superuser: run CREATE EXTENSION vector in koe's database once)"
	case "0A000", "58P01": // feature_not_supported, undefined_file
		return " (the pgvector extension is not installed on the PostgreSQL server)"
	}
	return ""
}

// HNSW indexes need a fixed dimension, and the dimension of koe's
// embeddings is only known when the first chunk embedded by a model
// arrives. The chunks table keeps embeddings in one dimensionless vector
// column next to their dims; each dimension gets its own partial expression
// index, created when that dimension first appears:
//
//	CREATE INDEX ... USING hnsw ((embedding::vector(768)) vector_cosine_ops) WHERE dims = 768
//
// and a search for a 768-dim query writes the same expression and the same
// predicate (with the number in the SQL text, so the planner can match the
// index), so it only ever compares vectors of its own dimension. Chunks of
// two models, or of a model being replaced, live side by side, and no
// migration has to know the model. (The alternative, a typed column per
// dimension, would alter the table whenever a model changes.)
//
// pgvector indexes vector up to 2,000 dimensions and halfvec up to 4,000:
// larger embeddings (3,072 for the large OpenAI model) are indexed as
// half-precision copies; above 4,000 they are searched without an index.
const (
	maxVectorIndexDims  = 2000
	maxHalfvecIndexDims = 4000
	// maxDims is pgvector's limit for a vector.
	maxDims = 16000
)

// vectorCast is the type a dims-dimensional embedding is compared as, and
// the HNSW operator class indexing it ("": no index).
func vectorCast(dims int) (cast, opclass string) {
	switch {
	case dims <= maxVectorIndexDims:
		return "vector(" + strconv.Itoa(dims) + ")", "vector_cosine_ops"
	case dims <= maxHalfvecIndexDims:
		return "halfvec(" + strconv.Itoa(dims) + ")", "halfvec_cosine_ops"
	default:
		return "vector(" + strconv.Itoa(dims) + ")", ""
	}
}

// dimsIndexName is the name of the HNSW index of one dimension.
func dimsIndexName(dims int) string {
	return "koe_knowledge_chunks_hnsw_" + strconv.Itoa(dims)
}

// dimsLockKey serializes the instances creating one dimension's index.
func dimsLockKey(dims int) int64 { return indexMigrateLockKey ^ int64(dims)<<1 ^ 1 }

// createDimsIndex creates the index of a new dimension and records it, in
// one transaction. It runs before the Put that needs it, not inside: the
// index build locks the table against writes, and two Puts each holding
// row locks while waiting to build would deadlock.
func createDimsIndex(ctx context.Context, tx pgx.Tx, dims int) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, dimsLockKey(dims)); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	var known bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM koe_knowledge_dims WHERE dims = $1)`, dims).Scan(&known); err != nil {
		return fmt.Errorf("read dimensions: %w", err)
	}
	if known {
		return nil
	}
	if cast, opclass := vectorCast(dims); opclass != "" {
		stmt := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON koe_knowledge_chunks USING hnsw ((embedding::%s) %s) WHERE dims = %d`,
			dimsIndexName(dims), cast, opclass, dims)
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("create index: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO koe_knowledge_dims (dims) VALUES ($1)`, dims); err != nil {
		return fmt.Errorf("record dimension: %w", err)
	}
	return nil
}
