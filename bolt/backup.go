package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// A backup is the database file as of one read transaction: bbolt's
// pages are copy-on-write, so what that transaction sees stays on disk,
// unchanged, until it ends, while writers go on committing beside it.
// What a backup costs the writers: pages freed while it reads cannot be
// reused until it ends (the file may grow), and a writer that must grow
// the file's mapping beyond koe's initial 256 MiB waits for it.

// WriteBackup writes a consistent copy of the whole database to w, as of
// one read transaction, and returns how many bytes it wrote: the copy is
// itself a bbolt file koe can open. It ends early with ctx's error when
// ctx ends.
func (s *Store) WriteBackup(ctx context.Context, w io.Writer, size func(int64)) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("back up history database: %w", err)
	}
	var n int64
	err := s.db.View(func(tx *bbolt.Tx) error {
		if size != nil {
			size(tx.Size())
		}
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx, w})
		return err
	})
	if err != nil {
		return n, fmt.Errorf("back up history database: %w", err)
	}
	return n, nil
}

// ctxWriter stops a copy at the first write after its context ended.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// BackupContents is what a verified backup holds.
type BackupContents struct {
	Histories, Records int
	Bytes              int64 // the file's size
}

// VerifyBackup checks the bbolt file at path, which nothing else has
// open: it reads every bucket and key, runs bbolt's consistency check
// (every page reachable once, the free list, key order) and counts the
// histories and records. A copy that was cut short or altered fails here
// with an error. Nothing is written to the file.
func VerifyBackup(ctx context.Context, path string) (c BackupContents, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return c, fmt.Errorf("verify backup: %w", err)
	}
	c.Bytes = fi.Size()
	// bbolt panics on some damage (a free list or page of the wrong
	// type): in this goroutine that is recovered as the file's fault. The
	// check's own goroutine could not recover it, so what it reads is read
	// here first: the free list, which a writable open loads (a read-only
	// one would leave it to the check), and every page of every bucket.
	// Opening writable writes nothing: bbolt writes only in transactions,
	// and this one runs none.
	defer func() {
		if r := recover(); r != nil {
			c, err = BackupContents{Bytes: c.Bytes}, fmt.Errorf("verify backup %s: the file is damaged: %v", path, r)
		}
	}()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: defaultLockTimeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			err = ErrLocked
		}
		return c, fmt.Errorf("verify backup: open %s: %w", path, err)
	}
	defer func() { _ = db.Close() }()
	err = db.View(func(tx *bbolt.Tx) error {
		root := tx.Bucket(bucketHistories)
		if root == nil {
			return errors.New("no histories bucket: not a koe database")
		}
		if err := walk(ctx, tx.Cursor().Bucket()); err != nil {
			return err
		}
		err := root.ForEachBucket(func(conf []byte) error {
			cb := root.Bucket(conf)
			return cb.ForEachBucket(func(uid []byte) error {
				mb := cb.Bucket(uid).Bucket(bucketMessages)
				if mb == nil {
					return nil // not a history (see historyBucket)
				}
				c.Histories++
				c.Records += mb.Stats().KeyN
				return nil
			})
		})
		if err != nil {
			return err
		}
		var first error
		// Drained to the end: the checker's goroutine blocks until every
		// problem is received.
		for err := range tx.Check() {
			if first == nil {
				first = err
			}
		}
		return first
	})
	if err != nil {
		return c, fmt.Errorf("verify backup %s: %w", path, err)
	}
	return c, nil
}

// walk reads every key and value of b and of the buckets in it.
func walk(ctx context.Context, b *bbolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v != nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return walk(ctx, b.Bucket(k))
	})
}

// backupLockWait is how long BackupFile waits for koe.db's lock.
const backupLockWait = 200 * time.Millisecond

// BackupFile copies the database at path, which no koe has open, to w
// and returns the bytes written. A running koe holds the file's lock:
// then it fails with ErrLocked, and the running koe must make the copy
// (Store.WriteBackup).
func BackupFile(ctx context.Context, path string, w io.Writer) (int64, error) {
	s, err := OpenReadOnly(path, backupLockWait)
	if err != nil {
		return 0, err
	}
	defer func() { _ = s.Close() }()
	return s.WriteBackup(ctx, w, nil)
}
