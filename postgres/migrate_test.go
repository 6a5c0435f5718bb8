package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"koe/testkit/pgtest"
)

// TestMigrate runs the migrator over a schema of the test's own.
func TestMigrate(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	connect := func() *pgx.Conn {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}
	conn := connect()
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	table := "koe_test_migrations_" + suffix
	thing := "koe_test_thing_" + suffix
	other := "koe_test_other_" + suffix
	t.Cleanup(func() {
		for _, name := range []string{table, thing, other} {
			_, _ = conn.Exec(context.Background(), `DROP TABLE IF EXISTS `+name)
		}
	})
	const lockKey = 4242
	v1 := migration{Version: 1, Name: "thing", Statements: []string{`CREATE TABLE ` + thing + ` (id integer PRIMARY KEY)`}}
	v2 := migration{Version: 2, Name: "thing has a name", Statements: []string{`ALTER TABLE ` + thing + ` ADD COLUMN name text`}}
	v3 := migration{Version: 3, Name: "broken", Statements: []string{
		`CREATE TABLE ` + other + ` (id integer)`,
		`ALTER TABLE ` + thing + ` ADD COLUMN nonsense no_such_type`,
	}}

	// Instances migrating at once apply v1 once between them.
	var wg sync.WaitGroup
	var applied atomic.Int64
	for range 3 {
		c := connect()
		wg.Go(func() {
			st, err := migrate(ctx, c, table, lockKey, []migration{v1}, nil)
			if err != nil || st.Version != 1 {
				t.Errorf("migrate: version %d, %v", st.Version, err)
			}
			applied.Add(int64(st.Applied))
		})
	}
	wg.Wait()
	if applied.Load() != 1 {
		t.Fatalf("v1 applied %d times", applied.Load())
	}
	// A new version applies alone.
	if st, err := migrate(ctx, conn, table, lockKey, []migration{v1, v2}, nil); err != nil || st.Version != 2 || st.Applied != 1 {
		t.Fatalf("migrate to v2: %+v, %v", st, err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+thing+` (id, name) VALUES (1, 'one')`); err != nil {
		t.Fatal(err)
	}
	// A failing version leaves nothing of itself, and is not recorded.
	if _, err := migrate(ctx, conn, table, lockKey, []migration{v1, v2, v3}, nil); err == nil || !strings.Contains(err.Error(), "schema migration 3 (broken): statement 2") {
		t.Fatalf("migrate a broken v3: %v", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, other).Scan(&exists); err != nil || exists {
		t.Fatalf("v3's first statement survived its failure (exists %v, %v)", exists, err)
	}
	var newest int
	if err := conn.QueryRow(ctx, `SELECT max(version) FROM `+table).Scan(&newest); err != nil || newest != 2 {
		t.Fatalf("recorded version %d (%v), want 2", newest, err)
	}
	// Migrations out of order are a programming error, caught before any.
	if _, err := migrate(ctx, conn, table, lockKey, []migration{v2}, nil); err == nil {
		t.Fatal("migrations out of order were run")
	}
}
