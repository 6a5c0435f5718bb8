package recall

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"koe"
	"koe/agent"
	"koe/bolt"
)

// chatter writes like a chat log: words drawn from a Zipf distribution
// over a vocabulary whose most frequent ranks are English function words
// and whose other ranks, up to 20k, are made-up content words.
type chatter struct {
	rng   *rand.Rand
	zipf  *rand.Zipf
	words []string
}

var functionWords = strings.Fields(`the i you to and a it of that is in my was for me we
	have but so on with just what do be are this not at like they about
	he she all if can her his your know was there when one go out get did`)

// newChatter draws with seed from the one vocabulary every chatter
// shares, so that questions meet the words of the corpus.
func newChatter(seed uint64) *chatter {
	vocabRng := rand.New(rand.NewPCG(1, 2))
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const vocab = 20000
	words := slices.Clone(functionWords)
	seen := map[string]bool{}
	for _, w := range words {
		seen[w] = true
	}
	for len(words) < vocab {
		b := make([]byte, 3+vocabRng.IntN(8))
		for i := range b {
			b[i] = byte('a' + vocabRng.IntN(26))
		}
		if w := string(b); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return &chatter{rng: rng, zipf: rand.NewZipf(rng, 1.07, 2, vocab-1), words: words}
}

// line is one message: 6 to 35 words, sometimes a question.
func (c *chatter) line() string {
	n := 6 + c.rng.IntN(30)
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(c.words[c.zipf.Uint64()])
	}
	if c.rng.IntN(4) == 0 {
		sb.WriteByte('?')
	} else {
		sb.WriteByte('.')
	}
	return sb.String()
}

// question is what a user asks about the past: two to five content
// words of the same distribution (function words skipped, as a question
// names its subject) in a fixed frame.
func (c *chatter) question() string {
	var sb strings.Builder
	sb.WriteString("do you remember what I said about the")
	for range 2 + c.rng.IntN(4) {
		w := c.zipf.Uint64()
		for w < uint64(len(functionWords)) {
			w = c.zipf.Uint64()
		}
		sb.WriteByte(' ')
		sb.WriteString(c.words[w])
	}
	sb.WriteByte('?')
	return sb.String()
}

const (
	benchPerSession = 20
	benchSessions   = 50 // per history
)

// benchCorpus stores n messages for conf "bench": histories of 50
// sessions of 20 messages each, a minute apart, the sessions one to three
// days apart.
func benchCorpus(b *testing.B, st *bolt.Store, n int) {
	b.Helper()
	ctx := b.Context()
	c := newChatter(uint64(n))
	at := time.Date(2021, 1, 4, 18, 0, 0, 0, time.Local)
	perHistory := benchPerSession * benchSessions
	for h := 0; h*perHistory < n; h++ {
		recs := make([]koe.Record, 0, perHistory)
		for i := 0; i < perHistory && h*perHistory+i < n; i++ {
			if i > 0 && i%benchPerSession == 0 {
				at = at.Add(time.Duration(24+c.rng.IntN(48)) * time.Hour)
			}
			r := koe.Record{Role: koe.RoleHuman, Name: "Ann", Content: c.line(), Timestamp: at.Format("2006-01-02T15:04:05")}
			if i%2 == 1 {
				r.Role, r.Name = koe.RoleAI, "Mika"
			}
			recs = append(recs, r)
			at = at.Add(time.Minute)
		}
		if err := st.CreateWith(ctx, "bench", fmt.Sprintf("h%04d", h), recs...); err != nil {
			b.Fatal(err)
		}
	}
}

// recallBytes is the space the conf's recall bucket takes in the file:
// the bytes of its pages, and the bytes in use in them.
func recallBytes(b *testing.B, path, conf string) (pages, inUse int) {
	b.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		root := tx.Bucket([]byte("recall"))
		if root == nil {
			return fmt.Errorf("no recall bucket")
		}
		s := root.Bucket([]byte(conf)).Stats()
		pages = (s.BranchPageN + s.BranchOverflowN + s.LeafPageN + s.LeafOverflowN) * db.Info().PageSize
		inUse = s.BranchInuse + s.LeafInuse
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return pages, inUse
}

func fileSize(b *testing.B, path string) int64 {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// benchRecall builds an index of n messages through the store and the
// indexer, reports what it costs on disk and in memory, and measures
// Recall at budget 1000 with per-call percentiles.
func benchRecall(b *testing.B, n int) {
	count := agent.NewTokenizer("").Count
	path := filepath.Join(b.TempDir(), "koe.db")
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	benchCorpus(b, st, n)
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	before := fileSize(b, path)

	st, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	svc := New(Options{Store: st, Count: count, Logger: quietLogger()})
	start := time.Now()
	if err := svc.Preload(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := svc.Settle(context.Background()); err != nil {
		b.Fatal(err)
	}
	indexing := time.Since(start)
	svc.Close()
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	fileDelta := fileSize(b, path) - before
	pages, inUse := recallBytes(b, path, "bench")

	// The heap a loaded character takes, read back from the store as
	// after a restart.
	st, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	heap0 := heapInUse()
	svc = New(Options{Store: st, Count: count, Logger: quietLogger()})
	defer svc.Close()
	if err := svc.Preload(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := svc.Settle(context.Background()); err != nil {
		b.Fatal(err)
	}
	heap := int64(heapInUse()) - int64(heap0)
	stats, err := svc.Stats(context.Background(), "bench")
	if err != nil || stats.Memories != n {
		b.Fatalf("indexed %+v, %v; want %d", stats, err, n)
	}

	c := newChatter(7)
	queries := make([]string, 256)
	for i := range queries {
		queries[i] = c.question()
	}
	// 1000 is the default block; 4000 is where SpeakerFrom and the
	// widest candidate lists apply.
	for _, budget := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("budget%d", budget), func(b *testing.B) {
			benchQueries(b, svc, queries, budget)
			b.ReportMetric(float64(fileDelta)/float64(n), "file-B/msg")
			b.ReportMetric(float64(pages)/float64(n), "bolt-B/msg")
			b.ReportMetric(float64(inUse)/float64(n), "bolt-used-B/msg")
			b.ReportMetric(float64(heap)/float64(n), "heap-B/msg")
			b.ReportMetric(float64(indexing.Microseconds())/float64(n), "index-µs/msg")
		})
	}
}

// benchQueries asks the queries in turn at budget and reports the
// per-call percentiles.
func benchQueries(b *testing.B, svc *Service, queries []string, budget int) {
	ctx := context.Background()
	took := make([]time.Duration, 0, b.N)
	memories := 0
	b.ResetTimer()
	for i := range b.N {
		t := time.Now()
		blk, err := svc.Recall(ctx, Query{ConfUID: "bench", Text: queries[i%len(queries)], Budget: budget})
		took = append(took, time.Since(t))
		if err != nil {
			b.Fatal(err)
		}
		memories += len(blk.Memories)
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(memories)/float64(b.N), "memories/op")
}

func BenchmarkRecall10k(b *testing.B)  { benchRecall(b, 10_000) }
func BenchmarkRecall100k(b *testing.B) { benchRecall(b, 100_000) }

// BenchmarkIndexMessage measures indexing one more message into a
// character of 10k: through the Service (Noted, then Settle, the store's
// reads and writes included; appending the record is not timed), and
// the in-memory index alone (character.add), with the real tokenizer and
// with the estimate.
func BenchmarkIndexMessage(b *testing.B) {
	const n = 10_000
	b.Run("noted", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "koe.db")
		st, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		benchCorpus(b, st, n)
		svc := New(Options{Store: st, Count: agent.NewTokenizer("").Count, Logger: quietLogger()})
		defer svc.Close()
		ctx := context.Background()
		if err := svc.Preload(ctx); err != nil {
			b.Fatal(err)
		}
		if err := svc.Settle(ctx); err != nil {
			b.Fatal(err)
		}
		c := newChatter(11)
		at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.Local)
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			r := koe.Record{Role: koe.RoleHuman, Name: "Ann", Content: c.line(), Timestamp: at.Add(time.Duration(i) * time.Minute).Format("2006-01-02T15:04:05")}
			if err := st.Append(ctx, "bench", "h0000", r); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			svc.Noted("bench", "h0000")
			if err := svc.Settle(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, counter := range []struct {
		name  string
		count func(string) int
	}{{"add/tokenizer", agent.NewTokenizer("").Count}, {"add/estimate", nil}} {
		b.Run(counter.name, func(b *testing.B) {
			c := newChatter(13)
			ch := newCharacter(counter.count)
			at := time.Date(2021, 1, 4, 18, 0, 0, 0, time.Local)
			entry := func(seq int) koe.RecallEntry {
				return koe.RecallEntry{
					HistoryUID: fmt.Sprintf("h%04d", seq/1000), Seq: uint64(seq%1000 + 2), Turn: seq%1000/2 + 1,
					Role: koe.RoleHuman, Name: "Ann", Text: c.line(),
					Timestamp: at.Add(time.Duration(seq) * time.Minute).Format("2006-01-02T15:04:05"),
				}
			}
			for i := range n {
				ch.add([]koe.RecallEntry{entry(i)})
			}
			more := make([]koe.RecallEntry, b.N)
			for i := range more {
				more[i] = entry(n + i)
			}
			b.ResetTimer()
			for i := range b.N {
				ch.add(more[i : i+1])
			}
		})
	}
}
