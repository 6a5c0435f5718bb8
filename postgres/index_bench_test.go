package postgres

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/knowledge"
)

// The benchmarks' corpus: chunks of words drawn from a vocabulary with a
// skew (some words common, most rare, as in text), 64-dim embeddings (the
// fake LLM's size) drawn at random.
const (
	benchVocabulary = 5000
	benchChunkWords = 120
	benchDims       = 64
	benchDocChunks  = 100
)

func benchWord(r *rand.Rand) string {
	// Squaring a uniform draw favours low word numbers: a Zipf-like skew.
	f := r.Float64()
	return fmt.Sprintf("w%x", int(f*f*benchVocabulary))
}

func benchVector(r *rand.Rand) []float32 {
	v := make([]float32, benchDims)
	var n float64
	for i := range v {
		v[i] = float32(r.NormFloat64())
		n += float64(v[i] * v[i])
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(n))
	}
	return v
}

func benchChunks(r *rand.Rand, n int) []knowledge.Chunk {
	chunks := make([]knowledge.Chunk, n)
	var words strings.Builder
	for i := range chunks {
		words.Reset()
		for range benchChunkWords {
			words.WriteString(benchWord(r))
			words.WriteByte(' ')
		}
		chunks[i] = knowledge.Chunk{Seq: i, Name: "bench.txt", Title: "Bench", Heading: benchWord(r),
			Text: words.String(), Tokens: benchChunkWords, Vector: benchVector(r)}
	}
	return chunks
}

// BenchmarkIndexPut replaces a document of 100 embedded chunks.
func BenchmarkIndexPut(b *testing.B) {
	p := openTestIndex(b)
	conf := testConf(b, p)
	chunks := benchChunks(rand.New(rand.NewPCG(1, 2)), benchDocChunks)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := p.Put(ctx, conf, fmt.Sprintf("doc-%d", i%10), chunks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchDocChunks)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkIndexSearch searches a character of 10k chunks (100k too
// with KOE_BENCH_POSTGRES_100K=1: loading them takes long on PGlite), by
// keywords only and hybrid, and reports latency percentiles.
func BenchmarkIndexSearch(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv("KOE_BENCH_POSTGRES_100K") == "1" {
		sizes = append(sizes, 100_000)
	}
	p := openTestIndex(b)
	for _, size := range sizes {
		conf := testConf(b, p)
		r := rand.New(rand.NewPCG(3, uint64(size)))
		start := time.Now()
		for d := 0; d*benchDocChunks < size; d++ {
			if err := p.Put(context.Background(), conf, fmt.Sprintf("doc-%d", d), benchChunks(r, benchDocChunks)); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("loaded %d chunks in %v", size, time.Since(start).Round(time.Millisecond))
		for _, mode := range []string{"keyword", "hybrid"} {
			b.Run(fmt.Sprintf("%s/%dk", mode, size/1000), func(b *testing.B) {
				r := rand.New(rand.NewPCG(5, 6))
				var took []time.Duration
				for b.Loop() {
					q := knowledge.SearchQuery{Text: "what about " + benchWord(r) + " and " + benchWord(r) + " " + benchWord(r) + "?", Limit: 8}
					if mode == "hybrid" {
						q.Vector = benchVector(r)
					}
					t0 := time.Now()
					hits, err := p.Search(context.Background(), conf, q)
					took = append(took, time.Since(t0))
					if err != nil {
						b.Fatal(err)
					}
					if len(hits) == 0 && mode == "hybrid" {
						b.Fatal("a hybrid search found nothing")
					}
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}
