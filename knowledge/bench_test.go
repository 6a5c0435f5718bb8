package knowledge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// manualText is the head of the benchmark vocabulary: the words of a real
// (if short) manual, which the generator draws most often, as a real
// manual's common words are.
const manualText = `Before first use, rinse the water tank and fill it with fresh cold water up
to the maximum mark. Switch the machine on with the main switch at the back; the power light
blinks while the boiler heats and stays lit when the machine is ready. Place a cup under the
spout, choose a strength with the bean button and press the single or double cup button.
Grinding starts at once and brewing follows. If the coffee runs too fast, turn the grinder dial
one step towards fine; if it drips slowly, one step towards coarse. Adjust the grind only while
the grinder runs, or the burrs may jam. The drip tray collects rinsing water and must be emptied
daily; a red float shows when it is full. Hard water leaves limescale in the boiler and pipes.
When the descaling light comes on, remove the filter cartridge, pour the descaling solution
into the tank, top it up with water and hold the steam and hot water buttons together for
three seconds. The cycle takes about twenty minutes and pauses halfway so that you can empty
the tray. Rinse the tank thoroughly afterwards and run one tank of clean water through the
system. To froth milk, purge the steam wand, dip it just below the surface of cold milk and
open the steam knob. Lower the jug as the milk expands. Wipe the wand with a damp cloth and
purge it again after every use, otherwise milk dries inside and blocks the nozzle. The brewing
unit can be removed from the side door for cleaning: press the red lever, pull the unit out by
its handle, rinse it under lukewarm water without detergent and let it dry before refitting it.
Never wash the brewing unit in a dishwasher. If the display shows an error code, switch the
machine off, wait a minute and switch it on again; if the code remains, note it and contact
customer service. The warranty covers manufacturing defects for two years from the date of
purchase and does not cover damage caused by limescale, misuse or unauthorised repairs.`

// corpus generates chunks with a Zipf-distributed vocabulary: the
// manual's words first, then made-up words (part names, codes) in the
// long tail a real collection of manuals has.
type corpus struct {
	rng   *rand.Rand
	vocab []string
	zipf  *rand.Zipf
}

func newCorpus(seed uint64) *corpus {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	seen := map[string]bool{}
	var vocab []string
	for _, w := range strings.Fields(manualText) {
		w = strings.ToLower(strings.Trim(w, ".,;:"))
		if !seen[w] {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	syllables := strings.Fields("ka ro mi tel van sor pre dun lis gra mon fe tri bal cor nis pha ul zen quo")
	for len(vocab) < 40000 {
		n := 2 + rng.IntN(3)
		var b strings.Builder
		for range n {
			b.WriteString(syllables[rng.IntN(len(syllables))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	// The math/rand/v2 Zipf takes a *rand.Rand of that package.
	return &corpus{rng: rng, vocab: vocab, zipf: rand.NewZipf(rng, 1.1, 2, uint64(len(vocab)-1))}
}

func (c *corpus) words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c.vocab[c.zipf.Uint64()])
	}
	return b.String()
}

func (c *corpus) vector(dim int) []float32 {
	if dim == 0 {
		return nil
	}
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(c.rng.NormFloat64())
	}
	return v
}

// chunksPerDoc is a long manual's chunk count at 256 tokens a chunk.
const chunksPerDoc = 200

// doc makes one document of n chunks of about 190 words (256 tokens).
func (c *corpus) doc(id string, n, dim int) []Chunk {
	out := make([]Chunk, n)
	for i := range out {
		out[i] = Chunk{DocID: id, Seq: i, Name: id + ".pdf", Title: "Manual " + id, Heading: c.words(3),
			Page: 1 + i/3, Text: c.words(190), Tokens: 256, Vector: c.vector(dim)}
	}
	return out
}

// fill puts n chunks into x under conf "c".
func (c *corpus) fill(b *testing.B, x Index, n, dim int) {
	b.Helper()
	for d := 0; d*chunksPerDoc < n; d++ {
		mustPut(b, x, "c", fmt.Sprintf("doc-%d", d), c.doc(fmt.Sprintf("doc-%d", d), min(chunksPerDoc, n-d*chunksPerDoc), dim))
	}
}

// queries are a few words of the corpus each, like a spoken question's
// content words.
func (c *corpus) queries(n, dim int) []SearchQuery {
	out := make([]SearchQuery, n)
	for i := range out {
		out[i] = SearchQuery{Text: c.words(2 + c.rng.IntN(5)), Vector: c.vector(dim), Limit: 8}
	}
	return out
}

// reportLatency adds the p50 and p99 of one search to the benchmark.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

func benchSearch(b *testing.B, x Index, qs []SearchQuery) {
	ctx := context.Background()
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if _, err := x.Search(ctx, "c", qs[i%len(qs)]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportLatency(b, lat)
}

// BenchmarkSearch is the retrieval latency of each store at 10k and 100k
// chunks: keywords only, and keywords fused with 64- and 768-dimensional
// vectors (the local store).
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("memory/%dk/keywords", n/1000), func(b *testing.B) {
			c := newCorpus(1)
			x := NewMemoryIndex()
			c.fill(b, x, n, 0)
			benchSearch(b, x, c.queries(1000, 0))
		})
		for _, dim := range []int{0, 64, 768} {
			mode := "keywords"
			if dim > 0 {
				mode = fmt.Sprintf("hybrid%d", dim)
			}
			b.Run(fmt.Sprintf("local/%dk/%s", n/1000, mode), func(b *testing.B) {
				c := newCorpus(1)
				x, _, _ := openLocal(b)
				c.fill(b, x, n, dim)
				benchSearch(b, x, c.queries(1000, dim))
			})
		}
	}
}

// BenchmarkLocalPut is ingest into the local store: one 200-chunk
// document per Put, committed (and synced) to bbolt.
func BenchmarkLocalPut(b *testing.B) {
	for _, dim := range []int{0, 768} {
		b.Run(fmt.Sprintf("dim%d", dim), func(b *testing.B) {
			c := newCorpus(2)
			x, _, _ := openLocal(b)
			docs := make([][]Chunk, 8)
			bytes := 0
			for i := range docs {
				docs[i] = c.doc("", chunksPerDoc, dim)
				for _, ch := range docs[i] {
					bytes += len(ch.Text)
				}
			}
			for i := 0; b.Loop(); i++ {
				mustPut(b, x, "c", fmt.Sprintf("doc-%d", i), docs[i%len(docs)])
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*chunksPerDoc)/secs, "chunks/s")
			b.ReportMetric(float64(b.N)*float64(bytes)/float64(len(docs))/secs/1e6, "text-MB/s")
		})
	}
}

// BenchmarkHeapPerChunk is what the in-memory part of a store costs per
// chunk of 190 words: the chunk itself, its postings, its vector.
func BenchmarkHeapPerChunk(b *testing.B) {
	const n = 20_000
	for _, tc := range []struct {
		name string
		dim  int
		make func() Index
	}{
		{"memory", 0, func() Index { return NewMemoryIndex() }},
		{"catalog-with-768-dim-vectors", 768, func() Index { return &MemoryIndex{cat: newCatalog(true)} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := newCorpus(3)
			docs := make([][]Chunk, n/chunksPerDoc)
			for i := range docs {
				docs[i] = c.doc(fmt.Sprintf("doc-%d", i), chunksPerDoc, tc.dim)
			}
			text := 0
			for _, d := range docs {
				for _, ch := range d {
					text += len(ch.Text) + len(ch.Heading) + len(ch.Title) + len(ch.Name)
				}
			}
			// The chunks' strings are made before the first reading, so
			// the heap growth is the index's own cost; text-B/chunk is
			// what the strings add.
			var perChunk float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				x := tc.make()
				for i, d := range docs {
					mustPut(b, x, "c", fmt.Sprintf("doc-%d", i), d)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perChunk = float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(x)
			}
			b.ReportMetric(perChunk, "heap-B/chunk")
			b.ReportMetric(float64(text)/n, "text-B/chunk")
		})
	}
}

// BenchmarkLocalOpen is the start-up cost of the local store: loading and
// indexing 100k stored chunks.
func BenchmarkLocalOpen(b *testing.B) {
	for _, dim := range []int{0, 768} {
		b.Run(fmt.Sprintf("100k/dim%d", dim), func(b *testing.B) {
			c := newCorpus(4)
			path := filepath.Join(b.TempDir(), "koe.db")
			s := openStore(b, path)
			defer s.Close()
			x, err := OpenLocalIndex(context.Background(), s, nil)
			if err != nil {
				b.Fatal(err)
			}
			c.fill(b, x, 100_000, dim)
			for b.Loop() {
				y, err := OpenLocalIndex(context.Background(), s, nil)
				if err != nil {
					b.Fatal(err)
				}
				if n, _ := y.Len(context.Background(), "c"); n != 100_000 {
					b.Fatalf("loaded %d chunks", n)
				}
			}
		})
	}
}
