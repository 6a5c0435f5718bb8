package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"koe"
	"koe/history"
)

// ErrLocked means another process holds the database file lock.
var ErrLocked = errors.New("database is locked by another process")

const defaultLockTimeout = time.Second

var (
	bucketHistories = []byte("histories")
	bucketMessages  = []byte("messages")
	bucketSummaries = []byte("summaries")
	bucketImages    = []byte("images")
	bucketPrompts   = []byte("prompts")
)

// Options configures Open.
type Options struct {
	// LockTimeout is how long Open waits for the file lock; 0 means 1s.
	LockTimeout time.Duration
	// Now is the clock for ids and timestamps; nil means time.Now.
	Now func() time.Time
}

// Store is koe's store in a bbolt file. It is safe for concurrent use.
type Store struct {
	db  *bbolt.DB
	now func() time.Time
	// writers counts the small writes in progress (see write).
	writers atomic.Int32
}

var _ history.Store = (*Store)(nil)

// write runs fn in a read-write transaction. Alone, it commits at once;
// with other writes in progress it joins their batch, which shares one
// commit and one disk sync among many sessions. A batch waits up to
// bbolt's MaxBatchDelay (10 ms) for company, which a lone writer, the
// usual case, should not pay on every message. fn may run more than once
// (bbolt reruns the functions of a failed batch one by one), so it must
// only touch tx.
func (s *Store) write(fn func(*bbolt.Tx) error) error {
	n := s.writers.Add(1)
	defer s.writers.Add(-1)
	if n == 1 {
		return s.db.Update(fn)
	}
	return s.db.Batch(fn)
}

// Open opens or creates the database at path.
func Open(path string, opts Options) (*Store, error) {
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = defaultLockTimeout
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create history database directory: %w", err)
	}
	// A large initial mapping (address space, not memory) spares the
	// remaps bbolt otherwise does each time the file doubles: a remap
	// stalled the whole process for up to half a second, which showed up
	// as first-audio outliers in every session, not just the writer's.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: timeout, InitialMmapSize: 256 << 20})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("open history database %s: %w (another koe is probably running with the same data directory)", path, ErrLocked)
		}
		return nil, fmt.Errorf("open history database %s: %w", path, err)
	}
	// Creating every root bucket here, if missing, is also the upgrade path
	// for databases written before a bucket existed: the rest of the code
	// can assume the root buckets are there.
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketHistories, bucketPrompts} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("bucket %q: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		// Release the file lock; the open error is the one worth reporting.
		_ = db.Close()
		return nil, fmt.Errorf("init history database %s: %w", path, err)
	}
	return &Store{db: db, now: now}, nil
}

// Close flushes and closes the database, releasing the file lock.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close history database: %w", err)
	}
	return nil
}

func (s *Store) timestamp() string {
	return s.now().Format(koe.TimestampLayout)
}

// Create starts a new, empty history (just its metadata record) and
// returns its uid.
func (s *Store) Create(ctx context.Context, confUID string) (string, error) {
	now := s.now()
	uid := koe.NewHistoryUID(now)
	if err := s.createWith(ctx, confUID, uid, now, nil); err != nil {
		return "", err
	}
	return uid, nil
}

// CreateWith creates history uid (see koe.NewHistoryUID) with its metadata record and
// then records, all in one transaction: a conversation's first message
// costs one disk sync, not two. It fails if uid already exists.
func (s *Store) CreateWith(ctx context.Context, confUID, uid string, records ...koe.Record) error {
	return s.createWith(ctx, confUID, uid, s.now(), records)
}

func (s *Store) createWith(ctx context.Context, confUID, uid string, now time.Time, records []koe.Record) error {
	if err := history.CheckHistory(ctx, confUID, uid); err != nil {
		return err
	}
	pending, err := history.EncodeHistory(now, records)
	if err != nil {
		return fmt.Errorf("create history %q for conf %q: %w", uid, confUID, err)
	}
	// Through write: sessions tend to start in bursts (e.g. after a
	// restart, every client reconnects) and then share a batch; the
	// function only touches tx, so bbolt may safely rerun it.
	err = s.write(func(tx *bbolt.Tx) error {
		conf, err := tx.Bucket(bucketHistories).CreateBucketIfNotExists([]byte(confUID))
		if err != nil {
			return fmt.Errorf("conf bucket: %w", err)
		}
		h, err := conf.CreateBucket([]byte(uid))
		if err != nil {
			return fmt.Errorf("history bucket: %w", err)
		}
		if _, err := h.CreateBucket(bucketMessages); err != nil {
			return fmt.Errorf("messages bucket: %w", err)
		}
		for _, p := range pending {
			if err := putRecord(h, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create history %q for conf %q: %w", uid, confUID, err)
	}
	return nil
}

// Append adds r to the end of an existing history. It never creates the
// history: a client naming an unknown uid is a bug or a stale reference, and
// silently creating histories would let clients fill the database.
func (s *Store) Append(ctx context.Context, confUID, historyUID string, r koe.Record) error {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return err
	}
	if r.Timestamp == "" {
		r.Timestamp = s.timestamp()
	}
	p, err := history.EncodeRecord(r)
	if err != nil {
		return fmt.Errorf("append to history %q of conf %q: %w", historyUID, confUID, err)
	}
	// write coalesces appends from many sessions into one commit and
	// fsync. A missing history is reported through a flag rather than an error
	// because an error would roll back the whole batch and make bbolt rerun
	// every other caller's append. The flag is reset on each run since bbolt
	// may call the function more than once.
	var missing bool
	err = s.write(func(tx *bbolt.Tx) error {
		missing = false
		h := historyBucket(tx, confUID, historyUID)
		if h == nil {
			missing = true
			return nil
		}
		return putRecord(h, p)
	})
	if err != nil {
		return fmt.Errorf("append to history %q of conf %q: %w", historyUID, confUID, err)
	}
	if missing {
		return fmt.Errorf("append to history %q of conf %q: %w", historyUID, confUID, koe.ErrNotFound)
	}
	return nil
}

// Messages returns every record of a history in order, metadata included.
// Images come with refs, not bytes (see Image), so the cost is that of the
// text. Page reads a part of a long history.
func (s *Store) Messages(ctx context.Context, confUID, historyUID string) ([]koe.Record, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	return s.records(ctx, confUID, historyUID, 0, 0)
}

// records reads a history's records after sequence after, oldest first,
// at most limit of them (0: all).
func (s *Store) records(ctx context.Context, confUID, historyUID string, after uint64, limit int) ([]koe.Record, error) {
	var out []koe.Record
	err := s.db.View(func(tx *bbolt.Tx) error {
		msgs := messagesBucket(tx, confUID, historyUID)
		if msgs == nil {
			return koe.ErrNotFound
		}
		c := msgs.Cursor()
		start := seqKey(after + 1)
		for k, v := c.Seek(start[:]); k != nil && (limit == 0 || len(out) < limit); k, v = c.Next() {
			r, err := decodeRecord(k, v)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read history %q of conf %q: %w", historyUID, confUID, err)
	}
	return out, nil
}

// List summarises the histories of confUID, most recently active first.
// Histories holding only their metadata record are left out because there is
// nothing to show for them. An unknown conf simply has no histories.
func (s *Store) List(ctx context.Context, confUID string) ([]koe.ListedHistory, error) {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return nil, err
	}
	out := []koe.ListedHistory{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		conf := tx.Bucket(bucketHistories).Bucket([]byte(confUID))
		if conf == nil {
			return nil
		}
		return conf.ForEachBucket(func(uid []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			h := conf.Bucket(uid)
			if h == nil {
				return nil
			}
			msgs := h.Bucket(bucketMessages)
			if msgs == nil {
				// Not written by Create; nothing a client could open.
				return nil
			}
			latest, ok, err := latestMessage(msgs)
			if err != nil {
				return fmt.Errorf("history %q: %w", uid, err)
			}
			if !ok {
				return nil
			}
			opening, err := openingMessage(msgs)
			if err != nil {
				return fmt.Errorf("history %q: %w", uid, err)
			}
			out = append(out, koe.ListedHistory{UID: string(uid), LatestMessage: latest, Timestamp: latest.Timestamp, Opening: opening})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list histories of conf %q: %w", confUID, err)
	}
	history.SortHistories(out)
	return out, nil
}

// latestMessage walks backwards from the end of msgs to the last
// non-metadata record. Normally only the last record is read, keeping List
// cheap however long the histories get.
func latestMessage(msgs *bbolt.Bucket) (koe.Record, bool, error) {
	c := msgs.Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		r, err := decodeRecord(k, v)
		if err != nil {
			return koe.Record{}, false, err
		}
		if r.Role != koe.RoleMetadata && r.Role != koe.RoleToolCall && r.Role != koe.RoleTool {
			return r, true, nil
		}
	}
	return koe.Record{}, false, nil
}

// openingMessage is the start of the first human message among the first
// koe.OpeningRecords records of msgs: a few records at the front of the
// bucket, however long the history.
func openingMessage(msgs *bbolt.Bucket) (string, error) {
	c := msgs.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		r, err := decodeRecord(k, v)
		if err != nil {
			return "", err
		}
		if r.Seq > koe.OpeningRecords {
			break
		}
		if r.Role == koe.RoleHuman {
			return koe.Opening(r.Content), nil
		}
	}
	return "", nil
}

// Delete removes a history with all its records, images and summaries.
func (s *Store) Delete(ctx context.Context, confUID, historyUID string) error {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		conf := tx.Bucket(bucketHistories).Bucket([]byte(confUID))
		if conf == nil {
			return koe.ErrNotFound
		}
		err := conf.DeleteBucket([]byte(historyUID))
		if errors.Is(err, berrors.ErrBucketNotFound) || errors.Is(err, berrors.ErrIncompatibleValue) {
			return koe.ErrNotFound
		}
		if err != nil {
			return err
		}
		// Its memories go with it, in the same transaction: a character
		// must not recall a conversation that was deleted.
		return dropRecall(tx, confUID, historyUID)
	})
	if err != nil {
		return fmt.Errorf("delete history %q of conf %q: %w", historyUID, confUID, err)
	}
	return nil
}

// Exists reports whether the history exists.
func (s *Store) Exists(ctx context.Context, confUID, historyUID string) (bool, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return false, err
	}
	var ok bool
	err := s.db.View(func(tx *bbolt.Tx) error {
		ok = messagesBucket(tx, confUID, historyUID) != nil
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("look up history %q of conf %q: %w", historyUID, confUID, err)
	}
	return ok, nil
}

// historyBucket returns the bucket of a history, or nil if the history does
// not exist. A history bucket without messages is treated as missing so that
// Exists, Append, Messages, AddSummary and Summaries agree.
func historyBucket(tx *bbolt.Tx, confUID, historyUID string) *bbolt.Bucket {
	conf := tx.Bucket(bucketHistories).Bucket([]byte(confUID))
	if conf == nil {
		return nil
	}
	h := conf.Bucket([]byte(historyUID))
	if h == nil || h.Bucket(bucketMessages) == nil {
		return nil
	}
	return h
}

// messagesBucket returns the messages bucket of a history, or nil if the
// history does not exist.
func messagesBucket(tx *bbolt.Tx, confUID, historyUID string) *bbolt.Bucket {
	h := historyBucket(tx, confUID, historyUID)
	if h == nil {
		return nil
	}
	return h.Bucket(bucketMessages)
}

// LastSeq returns the sequence number of the history's newest record: it
// changes with every record stored, so a reader that remembers it can tell
// whether someone else has written to the history since.
func (s *Store) LastSeq(ctx context.Context, confUID, historyUID string) (uint64, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return 0, err
	}
	var seq uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		msgs := messagesBucket(tx, confUID, historyUID)
		if msgs == nil {
			return koe.ErrNotFound
		}
		if k, _ := msgs.Cursor().Last(); len(k) == 8 {
			seq = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read history %q of conf %q: %w", historyUID, confUID, err)
	}
	return seq, nil
}

// Recall and knowledge keep a bucket per conf under a root bucket of
// their own, with sub-buckets; both reach them alike.

// confBucket returns conf's bucket under root, with the sub-buckets
// names, creating what is missing.
func confBucket(tx *bbolt.Tx, root []byte, conf string, names ...[]byte) (*bbolt.Bucket, error) {
	r, err := tx.CreateBucketIfNotExists(root)
	if err != nil {
		return nil, fmt.Errorf("%s bucket: %w", root, err)
	}
	b, err := r.CreateBucketIfNotExists([]byte(conf))
	if err != nil {
		return nil, fmt.Errorf("%s conf bucket: %w", root, err)
	}
	for _, name := range names {
		if _, err := b.CreateBucketIfNotExists(name); err != nil {
			return nil, fmt.Errorf("%s bucket %q: %w", root, name, err)
		}
	}
	return b, nil
}

// subBucket returns sub-bucket name of conf's bucket under root (name
// nil: conf's bucket itself), or nil when there is none.
func subBucket(tx *bbolt.Tx, root []byte, conf string, name []byte) *bbolt.Bucket {
	r := tx.Bucket(root)
	if r == nil {
		return nil
	}
	b := r.Bucket([]byte(conf))
	if b == nil || name == nil {
		return b
	}
	return b.Bucket(name)
}
