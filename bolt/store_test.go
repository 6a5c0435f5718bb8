package bolt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"koe"
	"koe/history/historytest"
)

func openTest(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "koe.db")
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func boltDump(t testing.TB, s *Store) string {
	t.Helper()
	var b strings.Builder
	var walk func(prefix string, bk *bbolt.Bucket) error
	walk = func(prefix string, bk *bbolt.Bucket) error {
		fmt.Fprintf(&b, "%s seq=%d\n", prefix, bk.Sequence())
		return bk.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+"/"+string(k), bk.Bucket(k))
			}
			fmt.Fprintf(&b, "%s/%x=%s\n", prefix, k, v)
			return nil
		})
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bbolt.Bucket) error {
			return walk(string(name), bk)
		})
	})
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	return b.String()
}

func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "nested", "dir", "koe.db")
	s, err := Open(path, Options{Now: historytest.StepClock(historytest.T0)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	h := historytest.MustCreate(t, s, "c")
	historytest.MustAppend(t, s, "c", h, koe.Record{Role: koe.RoleHuman, Content: "persist me"})
	want, err := s.Messages(ctx, "c", h)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&^0o600 != 0 {
		t.Errorf("db file mode = %o, want at most 0600", perm)
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if perm := di.Mode().Perm(); perm&^0o750 != 0 {
		t.Errorf("db dir mode = %o, want at most 0750", perm)
	}

	s2, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	got, err := s2.Messages(ctx, "c", h)
	if err != nil {
		t.Fatalf("Messages after reopen: %v", err)
	}
	if !reflect.DeepEqual(got, want) || len(got) != 2 || got[1].Content != "persist me" {
		t.Fatalf("after reopen got %+v, want %+v", got, want)
	}
	list, err := s2.List(ctx, "c")
	if err != nil || len(list) != 1 || list[0].UID != h {
		t.Fatalf("List after reopen = %+v, %v", list, err)
	}
}

func TestLocked(t *testing.T) {
	_, path := openTest(t, Options{})
	start := time.Now()
	s2, err := Open(path, Options{LockTimeout: 100 * time.Millisecond})
	elapsed := time.Since(start)
	if err == nil {
		_ = s2.Close()
		t.Fatal("second Open succeeded while the first store is open")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another koe") {
		t.Errorf("err = %q, want it to name %s and mention another koe", err, path)
	}
	if elapsed > 2*time.Second {
		t.Errorf("second Open took %v, want about 100ms", elapsed)
	}
}

// Corrupt values must surface as errors, never as panics.
func TestCorruptRecord(t *testing.T) {
	ctx := t.Context()
	s, _ := openTest(t, Options{})
	h := historytest.MustCreate(t, s, "c")
	err := s.db.Update(func(tx *bbolt.Tx) error {
		return putRawRecord(messagesBucket(tx, "c", h), []byte("{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Messages(ctx, "c", h); err == nil {
		t.Error("Messages on corrupt record: want error")
	}
	if _, err := s.List(ctx, "c"); err == nil {
		t.Error("List on corrupt record: want error")
	}
}

func TestClosedStore(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "koe.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := historytest.MustCreate(t, s, "c")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "c", h, koe.Record{Role: koe.RoleHuman}); err == nil {
		t.Error("Append after Close: want error")
	}
	if _, err := s.List(ctx, "c"); err == nil {
		t.Error("List after Close: want error")
	}
}

func BenchmarkAppend(b *testing.B) {
	ctx := b.Context()
	s, _ := openTest(b, Options{})
	// Many more sessions than CPUs, as on a busy server.
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		uid, err := s.Create(ctx, "bench")
		if err != nil {
			b.Error(err)
			return
		}
		r := koe.Record{Role: koe.RoleAI, Content: "A reasonably sized reply sentence from the assistant.", Name: "Mao"}
		for pb.Next() {
			if err := s.Append(ctx, "bench", uid, r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// putRawRecord appends v as is under the next sequence number, the way
// every version of koe has keyed records; tests use it to plant records in
// older formats or damaged ones.
func putRawRecord(msgs *bbolt.Bucket, v []byte) error {
	seq, err := msgs.NextSequence()
	if err != nil {
		return err
	}
	k := seqKey(seq)
	return msgs.Put(k[:], v)
}
