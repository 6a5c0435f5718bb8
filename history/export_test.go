package history

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"koe"
	"koe/testkit/pgtest"
)

// A record written before images were kept apart (its pictures inline as
// base64) is exported as stored and, imported into PostgreSQL, reads the
// same there, its pictures included.
func TestExportImportLegacyRecord(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "koe.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	uid := koe.NewHistoryUID(time.Now())
	if err := s.CreateWith(ctx, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	legacy := `{"role":"human","timestamp":"2024-01-01T10:00:00","content":"look","images":[{"source":"camera","mime_type":"image/png","data":"QUJD"},{"source":"upload","mime_type":"","data":"data:image/gif;base64,R0lGODlh"}]}`
	err = s.db.Update(func(tx *bolt.Tx) error {
		return putRecord(historyBucket(tx, "c", uid), pendingRecord{json: []byte(legacy)})
	})
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Messages(ctx, "c", uid)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := OpenReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	pg, err := OpenPostgres(context.Background(), pgtest.Schema(t), PGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	n := 0
	err = ro.ExportHistories(ctx, func(h *HistoryExport) error {
		n++
		if h.LastSeq != 3 || len(h.Records) != 3 || string(h.Records[2].Body) != legacy {
			t.Errorf("export: last seq %d, %d records, last %s", h.LastSeq, len(h.Records), h.Records[len(h.Records)-1].Body)
		}
		ok, err := pg.ImportHistory(context.Background(), h)
		if !ok || err != nil {
			t.Errorf("import: %v, %v", ok, err)
		}
		// Twice: left alone.
		if ok, err := pg.ImportHistory(context.Background(), h); ok || err != nil {
			t.Errorf("second import: %v, %v; want false, nil", ok, err)
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("export: %d histories, %v", n, err)
	}
	got, err := pg.Messages(ctx, "c", uid)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages\n got %+v\nwant %+v", got, want)
	}
	for i, w := range []struct{ mime, data string }{{"image/png", "ABC"}, {"image/gif", "GIF89a"}} {
		mime, data, err := pg.Image(ctx, "c", uid, got[2].Images[i].Ref)
		if err != nil || mime != w.mime || string(data) != w.data {
			t.Errorf("image %d: %q %q %v, want %q %q", i, mime, data, err, w.mime, w.data)
		}
	}
}

// OpenReadOnly neither creates a missing database nor opens one a writer
// holds.
func TestOpenReadOnly(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "koe.db")
	if _, err := OpenReadOnly(path, time.Second); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want not exist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReadOnly created %s", path)
	}
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(path, 50*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("beside a writer: %v, want ErrLocked", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Two readers at once are fine, and an empty database exports nothing.
	a, err := OpenReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	calls := 0
	if err := a.ExportHistories(ctx, func(*HistoryExport) error { calls++; return nil }); err != nil || calls != 0 {
		t.Errorf("empty database: %d histories, %v", calls, err)
	}
	if err := b.ExportConfs(ctx, func(*ConfExport) error { calls++; return nil }); err != nil || calls != 0 {
		t.Errorf("empty database: %d characters, %v", calls, err)
	}
}
