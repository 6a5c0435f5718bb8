// Package pgtest gives tests the PostgreSQL server scripts/test.sh starts
// (KOE_TEST_PG_DSN), each test in a schema of its own.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"koe/testkit"
)

// EnvDSN names the test server's DSN.
const EnvDSN = "KOE_TEST_PG_DSN"

// DSN returns the test server's DSN, or skips t without one; on CI
// (CI=true) a missing server fails t instead, so that CI cannot silently
// leave PostgreSQL untested.
func DSN(t testing.TB) string {
	t.Helper()
	testkit.External(t, "PostgreSQL")
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: PostgreSQL is not tested (scripts/test.sh starts a server)", EnvDSN)
		}
		t.Skipf("%s is not set: PostgreSQL not tested (scripts/test.sh starts a server)", EnvDSN)
	}
	return dsn
}

// Schema creates a schema of t's own on the test server (skipping t as DSN
// does without one), drops it when t ends, and returns a DSN whose
// connections use it.
func Schema(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "koe_test_" + hex.EncodeToString(b[:])
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if err := exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(dsn, schema)
}

// WithSearchPath returns dsn (a URL or key=value string) with connections
// that use schema.
func WithSearchPath(dsn, schema string) string {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + schema
}
