package knowledge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
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
// postgres_server_test.go); without them its case is skipped.
func BenchmarkIngest(b *testing.B) {
	type page struct {
		name string
		data []byte
	}
	var pages []page
	var fileBytes, textBytes int64
	for _, p := range manualPages {
		data, err := os.ReadFile(filepath.Join("testdata", "manual", p))
		if err != nil {
			b.Fatal(err)
		}
		text, err := Extract(context.Background(), p, "text/html", data)
		if err != nil {
			b.Fatal(err)
		}
		pages = append(pages, page{p, data})
		fileBytes += int64(len(data))
		textBytes += int64(len(text.Body))
	}
	stores := []struct {
		name string
		open func(b *testing.B) (Index, func(conf string))
	}{
		{"memory", func(b *testing.B) (Index, func(string)) { return NewMemoryIndex(), func(string) {} }},
		{"local", func(b *testing.B) (Index, func(string)) {
			x, _, _ := openLocal(b)
			return x, func(string) {}
		}},
		{"postgres", func(b *testing.B) (Index, func(string)) {
			p := openTestPostgres(b)
			return p, func(conf string) {
				ctx, cancel := context.WithTimeout(context.Background(), pgHangGuard)
				defer cancel()
				if _, err := p.pool.Exec(ctx, `DELETE FROM koe_knowledge_chunks WHERE conf_uid = $1`, conf); err != nil {
					b.Errorf("clean up %s: %v", conf, err)
				}
			}
		}},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			idx, cleanUp := st.open(b)
			docs := openStore(b, filepath.Join(b.TempDir(), "koe.db"))
			b.Cleanup(func() { _ = docs.Close() })
			s := New(Options{Config: DefaultConfig(), Docs: docs, Index: idx, Count: evalCount})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if err := s.Open(ctx); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			// The first ingest of the process builds the tokenizer's
			// tables and grows the heap: not what a running koe pays.
			if _, err := s.Add(ctx, "warm-up", Upload{Name: pages[0].name, Mime: "text/html", Data: pages[0].data}, evalCount, nil); err != nil {
				b.Fatal(err)
			}
			cleanUp("warm-up")
			b.SetBytes(fileBytes)
			chunks, i := 0, 0
			b.ResetTimer()
			for b.Loop() {
				conf := fmt.Sprintf("ingest-%d-%d", time.Now().UnixNano(), i)
				i++
				for _, p := range pages {
					d, err := s.Add(ctx, conf, Upload{Name: p.name, Mime: "text/html", Data: p.data}, evalCount, nil)
					if err != nil {
						b.Fatalf("add %s: %v", p.name, err)
					}
					chunks += d.Chunks
				}
				b.StopTimer()
				cleanUp(conf)
				b.StartTimer()
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(textBytes)*float64(b.N)/1e6/secs, "text-MB/s")
			b.ReportMetric(float64(chunks)/secs, "chunks/s")
		})
	}
}
