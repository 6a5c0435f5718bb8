package knowledge_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"koe/agent"
	"koe/bolt"
	"koe/knowledge"
	"koe/postgres"
	"koe/testkit/pglitetest"
)

// BenchmarkIngest is Service.Add of the whole SQLite manual (ten HTML
// pages, 506 KB) into a fresh character's knowledge base, per store:
// extraction, counting, chunking, indexing and storing the document in
// koe's bbolt file (fsync on every commit). MB/s is of the files as
// uploaded; text-MB/s of the text extracted from them; chunks/s of the
// chunks indexed. Keywords only: no embeddings endpoint.
//
//	go test ./knowledge -run '^$' -bench Ingest -benchtime 5x
//
// The postgres store needs PGlite or KOE_TEST_POSTGRES_DSN (see
// testkit/pglitetest); without them its case is skipped.
func BenchmarkIngest(b *testing.B) {
	type page struct {
		name string
		data []byte
	}
	var pages []page
	var fileBytes, textBytes int64
	for _, p := range knowledge.ManualPages {
		data, err := os.ReadFile(filepath.Join("testdata", "manual", p))
		if err != nil {
			b.Fatal(err)
		}
		text, err := knowledge.Extract(context.Background(), p, "text/html", data)
		if err != nil {
			b.Fatal(err)
		}
		pages = append(pages, page{p, data})
		fileBytes += int64(len(data))
		textBytes += int64(len(text.Body))
	}
	count := agent.NewTokenizer("gpt-4o").Count
	stores := []struct {
		name string
		open func(b *testing.B, docs *bolt.Store) knowledge.Index
	}{
		{"memory", func(*testing.B, *bolt.Store) knowledge.Index { return knowledge.NewMemoryIndex() }},
		{"local", func(b *testing.B, docs *bolt.Store) knowledge.Index {
			x, err := knowledge.OpenLocalIndex(context.Background(), docs, nil)
			if err != nil {
				b.Fatal(err)
			}
			return x
		}},
		{"postgres", func(b *testing.B, _ *bolt.Store) knowledge.Index {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			p, err := postgres.OpenKnowledgeIndex(ctx, pglitetest.DSN(b), slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = p.Close() })
			return p
		}},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			docs, err := bolt.Open(filepath.Join(b.TempDir(), "koe.db"), bolt.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = docs.Close() })
			idx := st.open(b, docs)
			s := knowledge.New(knowledge.Options{Config: knowledge.DefaultConfig(), Docs: docs, Index: idx, Count: count})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if err := s.Open(ctx); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			// The first ingest of the process builds the tokenizer's
			// tables and grows the heap: not what a running koe pays.
			warm, err := s.Add(ctx, "warm-up", knowledge.Upload{Name: pages[0].name, Mime: "text/html", Data: pages[0].data}, count, nil)
			if err != nil {
				b.Fatal(err)
			}
			cleanUp(b, s, "warm-up", warm.ID)
			b.SetBytes(fileBytes)
			chunks, i := 0, 0
			b.ResetTimer()
			for b.Loop() {
				conf := fmt.Sprintf("ingest-%d-%d", time.Now().UnixNano(), i)
				i++
				var ids []string
				for _, p := range pages {
					d, err := s.Add(ctx, conf, knowledge.Upload{Name: p.name, Mime: "text/html", Data: p.data}, count, nil)
					if err != nil {
						b.Fatalf("add %s: %v", p.name, err)
					}
					chunks += d.Chunks
					ids = append(ids, d.ID)
				}
				b.StopTimer()
				cleanUp(b, s, conf, ids...)
				b.StartTimer()
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(textBytes)*float64(b.N)/1e6/secs, "text-MB/s")
			b.ReportMetric(float64(chunks)/secs, "chunks/s")
		})
	}
}

// cleanUp deletes documents an ingest added: the postgres store's chunks
// outlive the benchmark's temporary files.
func cleanUp(b *testing.B, s *knowledge.Service, conf string, ids ...string) {
	for _, id := range ids {
		if _, err := s.Delete(context.Background(), conf, id); err != nil {
			b.Errorf("clean up %s of %s: %v", id, conf, err)
		}
	}
}

// TestMain stops the PGlite server the benchmark may have started (see
// testkit/pglitetest).
func TestMain(m *testing.M) {
	code := m.Run()
	pglitetest.Stop()
	os.Exit(code)
}
