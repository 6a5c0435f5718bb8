package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"koe"
)

// A backup taken while writers append holds every record committed before
// it began, passes the check, and opens as a koe database; a copy cut
// short or with a page overwritten fails the check.
func TestWriteBackupBesideWriters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "koe.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const histories, before = 4, 50
	uids := make([]string, histories)
	for i := range uids {
		if uids[i], err = s.Create(ctx, "conf"); err != nil {
			t.Fatal(err)
		}
		for n := range before {
			if err := s.Append(ctx, "conf", uids[i], koe.Record{Role: koe.RoleHuman, Content: fmt.Sprintf("before %d", n)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Writers go on appending during the copy, and a little after.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	appended := make(chan struct{}, histories)
	for _, uid := range uids {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.Append(ctx, "conf", uid, koe.Record{Role: koe.RoleAI, Content: fmt.Sprintf("during %d", n)}); err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					appended <- struct{}{}
				}
			}
		})
	}
	for range histories {
		<-appended // every writer is writing
	}
	backup := filepath.Join(dir, "backup.db")
	f, err := os.Create(backup)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	n, err := s.WriteBackup(ctx, f, func(n int64) { size = n })
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n != size {
		t.Fatalf("wrote %d bytes, announced %d", n, size)
	}
	written, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyBackup(ctx, backup)
	if err != nil {
		t.Fatal(err)
	}
	if after, err := os.ReadFile(backup); err != nil || !bytes.Equal(after, written) {
		t.Fatalf("the check changed the backup (%v)", err)
	}
	if got.Histories != histories || got.Records < histories*before || got.Bytes != n {
		t.Fatalf("the backup holds %+v; want %d histories, at least %d records, %d bytes", got, histories, histories*before, n)
	}
	copied, err := OpenReadOnly(backup, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range uids {
		records, err := copied.Messages(ctx, "conf", uid)
		if err != nil {
			t.Fatal(err)
		}
		var said []string
		for _, r := range records {
			if r.Role == koe.RoleHuman {
				said = append(said, r.Content)
			}
		}
		if len(said) != before || said[before-1] != fmt.Sprintf("before %d", before-1) {
			t.Fatalf("history %s: the backup holds %d of the %d messages stored before it", uid, len(said), before)
		}
	}
	_ = copied.Close()

	// A copy cut short, or with a data page overwritten, fails.
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.db")
	if err := os.WriteFile(short, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBackup(ctx, short); err == nil {
		t.Fatal("a copy cut in half passed the check")
	}
	bad := filepath.Join(dir, "bad.db")
	broken := append([]byte(nil), data...)
	page := os.Getpagesize()
	for i := 2 * page; i < len(broken); i += page {
		copy(broken[i:i+16], strings.Repeat("\xff", 16)) // every page's header
	}
	if err := os.WriteFile(bad, broken, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBackup(ctx, bad); err == nil {
		t.Fatal("a copy with broken pages passed the check")
	}
}

// A database no koe has open is copied directly; one koe holds is
// refused with ErrLocked, without waiting long.
func TestBackupFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "koe.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	uid, err := s.Create(ctx, "conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "conf", uid, koe.Record{Role: koe.RoleHuman, Content: "kept"}); err != nil {
		t.Fatal(err)
	}
	var sink strings.Builder
	if _, err := BackupFile(ctx, path, &sink); !errors.Is(err, ErrLocked) {
		t.Fatalf("a backup of an open database: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n, err := BackupFile(ctx, path, &sink)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() < n || int64(sink.Len()) != n {
		t.Fatalf("copied %d bytes (%d written) of a %d-byte file", n, sink.Len(), fi.Size())
	}
}
