package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// koe's versioned schema migrations. Migrations are append-only: a
// released one is never edited, a change is a new version. The store and
// the knowledge index each keep their applied versions in a table of
// their own, so that they migrate independently, in one database or two.

// migration is one step of a schema, its statements run in order in one
// transaction.
type migration struct {
	Version    int
	Name       string
	Statements []string
}

// beginner starts transactions: a *pgx.Conn or a *pgxpool.Pool.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// migrate brings the database to the last of migrations (versions 1, 2, ...
// in order), each version in its own transaction, recording them in table,
// and returns the schema version and how many versions it applied. Every
// transaction first takes the advisory lock lockKey, so that instances
// starting together apply each version once: the second waits, then finds
// it applied. A database migrated by a newer koe (a version this one does
// not know) is refused rather than used with a schema koe does not
// understand. hint, if not nil, adds advice to a failed statement's error.
func migrate(ctx context.Context, db beginner, table string, lockKey int64, migrations []migration, hint func(error) string) (version, applied int, err error) {
	ident := pgx.Identifier{table}.Sanitize()
	for i, m := range migrations {
		if m.Version != i+1 {
			return 0, 0, fmt.Errorf("migration %q has version %d, want %d", m.Name, m.Version, i+1)
		}
		did, err := applyMigration(ctx, db, ident, lockKey, m, len(migrations), hint)
		if err != nil {
			return 0, 0, fmt.Errorf("schema migration %d (%s): %w", m.Version, m.Name, err)
		}
		if did {
			applied++
		}
		version = m.Version
	}
	return version, applied, nil
}

// applyMigration applies m unless it is recorded in table, and reports whether it
// did.
func applyMigration(ctx context.Context, db beginner, table string, lockKey int64, m migration, known int, hint func(error) string) (bool, error) {
	tx, err := db.Begin(ctx)
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
	if newest >= m.Version {
		return false, tx.Commit(ctx)
	}
	if newest != m.Version-1 {
		return false, fmt.Errorf("the database's schema is at version %d, not %d", newest, m.Version-1)
	}
	for i, stmt := range m.Statements {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			h := ""
			if hint != nil {
				h = hint(err)
			}
			return false, fmt.Errorf("statement %d: %w%s", i+1, err, h)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
		return false, fmt.Errorf("record version: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}
