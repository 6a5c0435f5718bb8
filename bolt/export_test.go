package bolt

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"koe"
	"koe/history"
)

// A record written before images were kept apart (its pictures inline as
// base64) is exported as stored, byte for byte: postgres's tests import
// such a record and read it the same.
func TestExportLegacyRecord(t *testing.T) {
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
	err = s.db.Update(func(tx *bbolt.Tx) error {
		return putRecord(historyBucket(tx, "c", uid), history.EncodedRecord{JSON: []byte(legacy)})
	})
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
	n := 0
	err = ro.ExportHistories(ctx, func(h *history.HistoryExport) error {
		n++
		if h.LastSeq != 3 || len(h.Records) != 3 || string(h.Records[2].Body) != legacy || len(h.Images) != 0 {
			t.Errorf("export: last seq %d, %d records, %d images apart, last %s", h.LastSeq, len(h.Records), len(h.Images), h.Records[len(h.Records)-1].Body)
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("export: %d histories, %v", n, err)
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
	if err := a.ExportHistories(ctx, func(*history.HistoryExport) error { calls++; return nil }); err != nil || calls != 0 {
		t.Errorf("empty database: %d histories, %v", calls, err)
	}
	if err := b.ExportConfs(ctx, func(*history.ConfExport) error { calls++; return nil }); err != nil || calls != 0 {
		t.Errorf("empty database: %d characters, %v", calls, err)
	}
}
