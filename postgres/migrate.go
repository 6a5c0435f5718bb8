package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// koe's versioned schema migrations. Migrations are append-only: a
// released one is never edited, a change is a new version. The store and
// the knowledge index each keep their applied versions in a table of
// their own, so that they migrate independently, in one database or two.
//
// Expand and contract: a migration either only expands the schema (adds
// tables, columns with defaults, indexes), and every koe that ran on the
// schema before it runs after it too, or it contracts it (drops, renames,
// constraints older code would break), and says which koe is the oldest
// that still runs after it. Each applied version's row records that, in
// compatible_from, so that a koe older than the schema reads from the
// database itself whether it may run: a koe that knows version N runs on
// a schema at N+k whose compatible_from is at most N, and refuses
// otherwise. That lets a rolling upgrade go back: the new koe expands the
// schema, the old ones go on running on it, and a rollback needs no
// schema change. Koe from before this rule refuse any newer schema.

// migration is one step of a schema, its statements run in order in one
// transaction.
type migration struct {
	Version    int
	Name       string
	Statements []string
	// CompatibleFrom, when set, makes the migration a contracting one:
	// after it only a koe that knows at least this version runs on the
	// schema (one that no longer uses what it removes; at most Version).
	// 0 (the usual case) means it only expands: the previous version's
	// holds (1 for the first).
	CompatibleFrom int
}

// beginner starts transactions: a *pgx.Conn or a *pgxpool.Pool.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// schemaState is where migrate left a schema.
type schemaState struct {
	// Version is the schema's version: Known, or newer when a newer koe
	// expanded it.
	Version int
	// Known is the newest version this koe knows.
	Known int
	// CompatibleFrom is the oldest version a koe must know to run on it.
	CompatibleFrom int
	// Applied counts the versions this call applied.
	Applied int
}

// migrate brings the database to the last of migrations (versions 1, 2, ...
// in order), each version in its own transaction, recording them in table,
// and returns where the schema is. Every transaction first takes the
// advisory lock lockKey, so that instances starting together apply each
// version once: the second waits, then finds it applied. A database
// migrated by a newer koe runs if its compatible_from allows this koe
// (see above), and is refused otherwise rather than used with a schema
// koe does not understand. hint, if not nil, adds advice to a failed
// statement's error.
func migrate(ctx context.Context, db beginner, table string, lockKey int64, migrations []migration, hint func(error) string) (schemaState, error) {
	st := schemaState{Known: len(migrations)}
	// Each version's compatible_from, checked before any is applied.
	compat := make([]int, len(migrations))
	for i, m := range migrations {
		if m.Version != i+1 {
			return st, fmt.Errorf("migration %q has version %d, want %d", m.Name, m.Version, i+1)
		}
		prev := 1
		if i > 0 {
			prev = compat[i-1]
		}
		compat[i] = m.CompatibleFrom
		if compat[i] == 0 {
			compat[i] = prev
		}
		if compat[i] < prev || compat[i] > m.Version {
			return st, fmt.Errorf("migration %d (%s) is compatible from version %d: want %d to %d", m.Version, m.Name, compat[i], prev, m.Version)
		}
	}
	ident := pgx.Identifier{table}.Sanitize()
	for i, m := range migrations {
		did, newer, err := applyMigration(ctx, db, ident, lockKey, m, compat[i], st.Known, hint)
		if err != nil {
			return st, fmt.Errorf("schema migration %d (%s): %w", m.Version, m.Name, err)
		}
		if did {
			st.Applied++
		}
		st.Version, st.CompatibleFrom = m.Version, compat[i]
		if newer.Version > st.Version {
			st.Version, st.CompatibleFrom = newer.Version, newer.CompatibleFrom
		}
	}
	return st, nil
}

// applyMigration applies m, which leaves the schema compatible from
// compat, unless it is recorded in table, and reports whether it did. When
// the schema is newer than known (the newest version this koe knows),
// newer is its version and compatible_from.
func applyMigration(ctx context.Context, db beginner, table string, lockKey int64, m migration, compat, known int, hint func(error) string) (did bool, newer schemaState, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, newer, fmt.Errorf("begin: %w", err)
	}
	// After a commit this is a no-op.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
		return false, newer, fmt.Errorf("lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		version         integer PRIMARY KEY,
		name            text NOT NULL,
		applied_at      timestamptz NOT NULL DEFAULT now(),
		compatible_from integer
	)`); err != nil {
		return false, newer, fmt.Errorf("create %s: %w", table, err)
	}
	// A table made before expand/contract lacks the column: added once,
	// and filled below for the versions applied before it.
	var hasCompat bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = 'compatible_from' AND NOT attisdropped)`, table).Scan(&hasCompat); err != nil {
		return false, newer, fmt.Errorf("read %s: %w", table, err)
	}
	if !hasCompat {
		if _, err := tx.Exec(ctx, `ALTER TABLE `+table+` ADD COLUMN compatible_from integer`); err != nil {
			return false, newer, fmt.Errorf("add compatible_from to %s: %w", table, err)
		}
	}
	var newest int
	var newestCompat *int
	err = tx.QueryRow(ctx, `SELECT version, compatible_from FROM `+table+` ORDER BY version DESC LIMIT 1`).Scan(&newest, &newestCompat)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, newer, fmt.Errorf("read %s: %w", table, err)
	}
	if newest > known {
		if newestCompat == nil {
			return false, newer, fmt.Errorf("the database's schema is at version %d, newer than this koe knows (%d): run a newer koe", newest, known)
		}
		if *newestCompat > known {
			return false, newer, fmt.Errorf("the database's schema is at version %d, newer than this koe knows (%d), "+
				"and a migration since removed what older koe use: it needs a koe that knows version %d or later; run a newer koe", newest, known, *newestCompat)
		}
		newer = schemaState{Version: newest, CompatibleFrom: *newestCompat}
	}
	if newest >= m.Version {
		// Applied, perhaps by a koe from before compatible_from: the
		// record is completed, so that older koe can judge the schema.
		if _, err := tx.Exec(ctx, `UPDATE `+table+` SET compatible_from = $2 WHERE version = $1 AND compatible_from IS NULL`, m.Version, compat); err != nil {
			return false, newer, fmt.Errorf("record compatible_from: %w", err)
		}
		return false, newer, tx.Commit(ctx)
	}
	if newest != m.Version-1 {
		return false, newer, fmt.Errorf("the database's schema is at version %d, not %d", newest, m.Version-1)
	}
	for i, stmt := range m.Statements {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			h := ""
			if hint != nil {
				h = hint(err)
			}
			return false, newer, fmt.Errorf("statement %d: %w%s", i+1, err, h)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (version, name, compatible_from) VALUES ($1, $2, $3)`, m.Version, m.Name, compat); err != nil {
		return false, newer, fmt.Errorf("record version: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, newer, fmt.Errorf("commit: %w", err)
	}
	return true, newer, nil
}
