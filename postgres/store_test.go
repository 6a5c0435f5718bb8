package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"koe"
	"koe/history/historytest"
	"koe/testkit/pgtest"
)

// Two koe instances (two stores, two pools) appending to one history at
// once: every record gets its own sequence number, none is lost, and the
// numbers have no gaps.
func TestStoreAppendsFromTwoPools(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Schema(t)
	open := func() *Store {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := Open(ctx, dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(), open()
	uid := historytest.MustCreate(t, a, "c")
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for i := range 2 * writers {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for j := range each {
				if err := s.Append(ctx, "c", uid, koe.Record{Role: koe.RoleHuman, Content: fmt.Sprintf("w%d-%d", i, j)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	msgs, err := b.Messages(ctx, "c", uid)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2*writers*each+1 {
		t.Fatalf("%d records, want %d", len(msgs), 2*writers*each+1)
	}
	seen := map[string]bool{}
	for i, m := range msgs {
		if m.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, m.Seq)
		}
		if seen[m.Content] {
			t.Fatalf("record %q stored twice", m.Content)
		}
		seen[m.Content] = true
	}
	// Each writer's records are in its own order.
	next := map[int]int{}
	for _, m := range msgs[1:] {
		var w, j int
		if _, err := fmt.Sscanf(m.Content, "w%d-%d", &w, &j); err != nil {
			t.Fatal(err)
		}
		if j != next[w] {
			t.Fatalf("writer %d: record %d after %d", w, j, next[w]-1)
		}
		next[w]++
	}
	if last, err := a.LastSeq(ctx, "c", uid); err != nil || last != uint64(len(msgs)) {
		t.Fatalf("LastSeq = %d, %v; want %d", last, err, len(msgs))
	}
}

// An operation that cannot finish in time fails with the timeout named,
// and leaves nothing behind: here another session holds the history's row.
func TestStoreTimeout(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, dsn, Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	uid := historytest.MustCreate(t, s, "c")
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM koe_histories WHERE uid = $1 FOR UPDATE`, uid); err != nil {
		t.Fatal(err)
	}
	err = s.Append(ctx, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "late"})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "within 300ms") {
		t.Fatalf("Append while the history is locked: %v; want a timeout naming 300ms", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Messages(ctx, "c", uid)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("Messages = %d records, %v; want only the metadata", len(msgs), err)
	}
	historytest.MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "now"})
}

// Opening migrates once; a second store on the same database finds the
// schema current, and a schema newer than koe knows is refused.
func TestStoreOpenMigrations(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	uid := historytest.MustCreate(t, s, "c")
	s2, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	if ok, err := s2.Exists(ctx, "c", uid); err != nil || !ok {
		t.Fatalf("second store does not see the history: %v, %v", ok, err)
	}
	_ = s2.Close()
	var versions int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM koe_store_migrations`).Scan(&versions); err != nil || versions != len(storeMigrations) {
		t.Fatalf("%d versions recorded (%v), want %d", versions, err, len(storeMigrations))
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO koe_store_migrations (version, name) VALUES ($1, 'from the future')`, len(storeMigrations)+1); err != nil {
		t.Fatal(err)
	}
	if s3, err := Open(ctx, dsn, Options{}); err == nil || !strings.Contains(err.Error(), "newer than this koe knows") {
		if s3 != nil {
			_ = s3.Close()
		}
		t.Fatalf("open on a newer schema: %v", err)
	}
}

// A DSN that does not parse or a server that is not there is a clear
// error, and the DSN's password is not repeated in it.
func TestStoreOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Open(ctx, "postgres://koe:s3cret@127.0.0.1:notaport/koe", Options{}); err == nil ||
		!strings.Contains(err.Error(), "parse the DSN") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("bad DSN: %v", err)
	}
	// Port 1 on loopback: nothing listens there.
	_, err := Open(ctx, "postgres://koe:s3cret@127.0.0.1:1/koe?connect_timeout=5", Options{})
	if err == nil || !strings.Contains(err.Error(), "postgres store: connect") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("no server: %v", err)
	}
}
