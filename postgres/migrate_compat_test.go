package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"koe/testkit/pgtest"
)

// Expand and contract: a koe runs on a schema newer than it knows when the
// versions since only expanded it, and refuses one a migration contracted
// past it, saying which koe it needs; the record is completed for tables
// written before the rule, and a schema recorded without it is refused as
// before.
func TestMigrateExpandContract(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	table := "koe_test_compat_" + suffix
	thing := "koe_test_compat_thing_" + suffix
	const lockKey = 4343
	v1 := migration{Version: 1, Name: "thing", Statements: []string{`CREATE TABLE ` + thing + ` (id integer PRIMARY KEY, old text)`}}
	v2 := migration{Version: 2, Name: "thing has a name", Statements: []string{`ALTER TABLE ` + thing + ` ADD COLUMN name text NOT NULL DEFAULT ''`}}
	// v3 drops what only koe knowing version 1 used: koe knowing 2 stopped.
	v3 := migration{Version: 3, Name: "thing loses old", CompatibleFrom: 2, Statements: []string{`ALTER TABLE ` + thing + ` DROP COLUMN old`}}
	v4 := migration{Version: 4, Name: "thing's name is required", CompatibleFrom: 4, Statements: []string{`ALTER TABLE ` + thing + ` ADD CHECK (name <> '')`}}

	// The table as koe before the rule made it: no compatible_from.
	for _, sql := range []string{
		`CREATE TABLE ` + table + ` (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
		v1.Statements[0],
		`INSERT INTO ` + table + ` (version, name) VALUES (1, 'thing')`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range []string{table, thing} {
			_, _ = conn.Exec(context.Background(), `DROP TABLE IF EXISTS `+name)
		}
	})
	run := func(ms ...migration) (schemaState, error) { return migrate(ctx, conn, table, lockKey, ms, nil) }
	want := func(what string, got schemaState, err error, version, known, compat, applied int) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if w := (schemaState{Version: version, Known: known, CompatibleFrom: compat, Applied: applied}); got != w {
			t.Fatalf("%s: %+v, want %+v", what, got, w)
		}
	}
	refused := func(what string, err error, says string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Fatalf("%s: %v, want it to say %q", what, err, says)
		}
	}

	st, err := run(v1, v2)
	want("the new koe expands", st, err, 2, 2, 1, 1)
	var compats []int
	rows, err := conn.Query(ctx, `SELECT compatible_from FROM `+table+` ORDER BY version`)
	if err == nil {
		compats, err = pgx.CollectRows(rows, pgx.RowTo[int])
	}
	if err != nil || fmt.Sprint(compats) != "[1 1]" {
		t.Fatalf("recorded compatible_from %v (%v), want [1 1]: version 1's completed", compats, err)
	}
	st, err = run(v1)
	want("the old koe on the expanded schema", st, err, 2, 1, 1, 0)

	st, err = run(v1, v2, v3)
	want("a contract that koe knowing 2 survives", st, err, 3, 3, 2, 1)
	st, err = run(v1, v2)
	want("koe knowing 2 on it", st, err, 3, 2, 2, 0)
	_, err = run(v1)
	refused("koe knowing 1 on it", err, "the database's schema is at version 3, newer than this koe knows (1), "+
		"and a migration since removed what older koe use: it needs a koe that knows version 2 or later; run a newer koe")

	st, err = run(v1, v2, v3, v4)
	want("a contract for the newest only", st, err, 4, 4, 4, 1)
	_, err = run(v1, v2, v3)
	refused("koe knowing 3 on it", err, "needs a koe that knows version 4 or later")

	// A version recorded by a koe from before the rule says nothing of
	// what older koe may do: refused as before.
	if _, err := conn.Exec(ctx, `INSERT INTO `+table+` (version, name) VALUES (5, 'from before the rule')`); err != nil {
		t.Fatal(err)
	}
	_, err = run(v1, v2, v3, v4)
	refused("a newer version without compatible_from", err, "the database's schema is at version 5, newer than this koe knows (4): run a newer koe")

	// Declarations that cannot hold are refused before anything runs.
	bad := migration{Version: 2, Name: "bad", CompatibleFrom: 3}
	_, err = migrate(ctx, conn, "koe_test_never_"+suffix, lockKey, []migration{v1, bad}, nil)
	refused("compatible from a version after it", err, "is compatible from version 3: want 1 to 2")
	_, err = migrate(ctx, conn, "koe_test_never_"+suffix, lockKey, []migration{v1, v2, v3, {Version: 4, Name: "back", CompatibleFrom: 1}}, nil)
	refused("compatible from before the previous contract", err, "is compatible from version 1: want 2 to 4")
}
