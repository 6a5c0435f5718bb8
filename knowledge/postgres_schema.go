package knowledge

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// koe owns its PostgreSQL schema: it creates and migrates it at start, so
// an operator only provides a database (and pgvector; see migration 1).
// Migrations are append-only: a released one is never edited, a change is a
// new version.

// migration is one step of the schema, its statements run in order.
type migration struct {
	version    int
	name       string
	statements []string
}

// schemaMigrationsTable records the versions applied to the database.
const schemaMigrationsTable = "koe_schema_migrations"

// migrateLockKey is the pg_advisory_xact_lock key that serializes koe
// instances migrating one database at once (any fixed number: it only has
// to be koe's own).
const migrateLockKey int64 = 0x6b6f655f6d696772 // "koe_migr"

// pgMigrations is the knowledge store's schema, oldest first.
var pgMigrations = []migration{
	{
		version: 1,
		name:    "knowledge chunks with full-text and vector search",
		statements: []string{
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

// migrate brings the database to the last of migrations, each version in
// its own transaction, and returns the schema version and how many versions
// it applied. Every transaction first takes an advisory lock, so that
// instances starting together apply each version once: the second waits,
// then finds it applied. A database migrated by a newer koe (a version this
// one does not know) is refused rather than used with a schema koe does not
// understand.
func migrate(ctx context.Context, conn *pgx.Conn, table string, lockKey int64, migrations []migration) (version, applied int, err error) {
	ident := pgx.Identifier{table}.Sanitize()
	for i, m := range migrations {
		if m.version != i+1 {
			return 0, 0, fmt.Errorf("migration %q has version %d, want %d", m.name, m.version, i+1)
		}
		did, err := applyMigration(ctx, conn, ident, lockKey, m, len(migrations))
		if err != nil {
			return 0, 0, fmt.Errorf("schema migration %d (%s): %w", m.version, m.name, err)
		}
		if did {
			applied++
		}
		version = m.version
	}
	return version, applied, nil
}

// applyMigration applies m unless it is recorded in table, and reports
// whether it did.
func applyMigration(ctx context.Context, conn *pgx.Conn, table string, lockKey int64, m migration, known int) (bool, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	// After a commit this is a no-op.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
		return false, fmt.Errorf("lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return false, fmt.Errorf("create %s: %w", table, err)
	}
	var newest int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+table).Scan(&newest); err != nil {
		return false, fmt.Errorf("read %s: %w", table, err)
	}
	if newest > known {
		return false, fmt.Errorf("the database's schema is at version %d, newer than this koe knows (%d): run a newer koe", newest, known)
	}
	if newest >= m.version {
		return false, tx.Commit(ctx)
	}
	if newest != m.version-1 {
		return false, fmt.Errorf("the database's schema is at version %d, not %d", newest, m.version-1)
	}
	for i, stmt := range m.statements {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return false, fmt.Errorf("statement %d: %w%s", i+1, err, extensionHint(err))
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
		return false, fmt.Errorf("record version: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return true, nil
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
func dimsLockKey(dims int) int64 { return migrateLockKey ^ int64(dims)<<1 ^ 1 }

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
