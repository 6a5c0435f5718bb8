package recall

import (
	"context"
	"errors"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"koe"
	"koe/bolt"
	"koe/textindex"
)

// hangGuard bounds how long a test waits for the indexer: a hang guard,
// not a performance assertion.
const hangGuard = 30 * time.Second

// t0 is a Thursday afternoon; sessions of the tests are days apart.
var t0 = time.Date(2025, 5, 8, 13, 56, 0, 0, time.Local)

// say is one message of a made-up conversation.
type say struct{ role, name, text string }

func user(name, text string) say { return say{koe.RoleHuman, name, text} }
func mika(text string) say       { return say{koe.RoleAI, "Mika", text} }

// talk makes records of lines a minute apart from start.
func talk(start time.Time, lines ...say) []koe.Record {
	out := make([]koe.Record, len(lines))
	for i, l := range lines {
		out[i] = koe.Record{
			Role: l.role, Name: l.name, Content: l.text,
			Timestamp: start.Add(time.Duration(i) * time.Minute).Format("2006-01-02T15:04:05"),
		}
	}
	return out
}

// countingStore is the history store with a count of the reads of
// records for indexing, and hooks run before each Since and after each
// SaveRecall.
type countingStore struct {
	*bolt.Store
	since atomic.Int64

	mu        sync.Mutex
	afterSave func(conf, uid string, saved []koe.RecallEntry)
	onSince   func()
}

func (s *countingStore) Since(ctx context.Context, conf, uid string, after uint64, limit int) ([]koe.Record, error) {
	s.since.Add(1)
	s.mu.Lock()
	hook := s.onSince
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	return s.Store.Since(ctx, conf, uid, after, limit)
}

func (s *countingStore) setOnSince(fn func()) {
	s.mu.Lock()
	s.onSince = fn
	s.mu.Unlock()
}

func (s *countingStore) SaveRecall(ctx context.Context, conf, uid string, from, mark koe.RecallMark, entries []koe.RecallEntry) ([]koe.RecallEntry, error) {
	saved, err := s.Store.SaveRecall(ctx, conf, uid, from, mark, entries)
	s.mu.Lock()
	hook := s.afterSave
	s.mu.Unlock()
	if err == nil && hook != nil {
		hook(conf, uid, saved)
	}
	return saved, err
}

func (s *countingStore) setAfterSave(fn func(conf, uid string, saved []koe.RecallEntry)) {
	s.mu.Lock()
	s.afterSave = fn
	s.mu.Unlock()
}

// fixture is a history database in a temporary directory and a Service
// over it.
type fixture struct {
	t     testing.TB
	path  string
	store *bolt.Store
	cs    *countingStore
	svc   *Service
	opts  Options
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "koe.db"), opts: opts}
	f.open()
	t.Cleanup(f.close)
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	st, err := bolt.Open(f.path, bolt.Options{})
	if err != nil {
		f.t.Fatalf("open store: %v", err)
	}
	f.store = st
	f.cs = &countingStore{Store: st}
	opts := f.opts
	opts.Store = f.cs
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	f.svc = New(opts)
}

func (f *fixture) close() {
	if f.svc != nil {
		f.svc.Close()
		f.svc = nil
	}
	if f.store != nil {
		_ = f.store.Close()
		f.store = nil
	}
}

// restart closes the Service and the store and opens both again.
func (f *fixture) restart() {
	f.t.Helper()
	f.close()
	f.open()
}

// create stores a history of conf with records and notes it.
func (f *fixture) create(conf, uid string, recs ...koe.Record) {
	f.t.Helper()
	ctx := f.t.Context()
	if err := f.store.CreateWith(ctx, conf, uid, recs...); err != nil {
		f.t.Fatalf("CreateWith(%s, %s): %v", conf, uid, err)
	}
	f.svc.Noted(conf, uid)
}

// add appends records to a history and notes it.
func (f *fixture) add(conf, uid string, recs ...koe.Record) {
	f.t.Helper()
	ctx := f.t.Context()
	for _, r := range recs {
		if err := f.store.Append(ctx, conf, uid, r); err != nil {
			f.t.Fatalf("Append(%s, %s): %v", conf, uid, err)
		}
	}
	f.svc.Noted(conf, uid)
}

func (f *fixture) settle() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := f.svc.Settle(ctx); err != nil {
		f.t.Fatalf("Settle: %v", err)
	}
}

func (f *fixture) recall(q Query) Block {
	f.t.Helper()
	if q.Budget == 0 {
		q.Budget = 1000
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	b, err := f.svc.Recall(ctx, q)
	if err != nil {
		f.t.Fatalf("Recall(%q): %v", q.Text, err)
	}
	return b
}

// seqOf finds the sequence number of the record of a history whose
// content is text.
func (f *fixture) seqOf(conf, uid, text string) uint64 {
	f.t.Helper()
	ctx := f.t.Context()
	msgs, err := f.store.Messages(ctx, conf, uid)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Content == text {
			return m.Seq
		}
	}
	f.t.Fatalf("no record %q in %s", text, uid)
	return 0
}

// has reports whether a memory of the block says text.
func has(b Block, text string) bool {
	for _, m := range b.Memories {
		if m.Text == text {
			return true
		}
	}
	return false
}

// rankOf is the rank of the memory saying text (0: not recalled).
func rankOf(b Block, text string) int {
	for _, m := range b.Memories {
		if m.Text == text {
			return m.Rank
		}
	}
	return 0
}

// testEmbedder stands in for an embeddings endpoint (package llm's
// Embedder is on another branch): a bag of stems, each stem its own
// dimension (so that unrelated words never collide), with a few synonyms
// folded together so that a question can match a message by meaning
// without sharing its words. It fails while fail is set.
type testEmbedder struct {
	model string
	fail  atomic.Bool
	calls atomic.Int64

	mu   sync.Mutex
	dims map[string]int
}

const testDims = 2048

var synonyms = map[string]string{"canin": "dog", "pup": "dog", "puppi": "dog", "hound": "dog"}

func (e *testEmbedder) Model() string { return e.model }

// dim is a stem's dimension: its own while there are dimensions left.
func (e *testEmbedder) dim(term string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if d, ok := e.dims[term]; ok {
		return d
	}
	if e.dims == nil {
		e.dims = map[string]int{}
	}
	d := len(e.dims)
	if d >= testDims {
		h := fnv.New32a()
		h.Write([]byte(term))
		return int(h.Sum32() % testDims)
	}
	e.dims[term] = d
	return d
}

func (e *testEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.calls.Add(1)
	if e.fail.Load() {
		return nil, errors.New("embeddings: 503 Service Unavailable")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, testDims)
		for _, term := range textindex.Terms(t) {
			if s, ok := synonyms[term]; ok {
				term = s
			}
			v[e.dim(term)]++
		}
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		if norm > 0 {
			for j := range v {
				v[j] /= float32(math.Sqrt(norm))
			}
		}
		out[i] = v
	}
	return out, nil
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}
