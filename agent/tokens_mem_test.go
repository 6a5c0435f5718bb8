package agent

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"koe/internal/bpe"
)

// What a vocabulary costs a process: measured in a fresh process (the test
// binary run again), since a vocabulary is built once per process and the
// process's RSS is the point.

// tokenMemory is what building one vocabulary added to a fresh process,
// after a collection: live heap, heap in use, heap the collector scans,
// resident set, and the time the build took.
type tokenMemory struct {
	HeapAlloc, HeapInuse, ScanHeap int64
	// RSS is VmRSS: RSSAnon (the heap, among others) plus RSSFile (pages
	// of files mapped in, such as the vocabularies embedded in the binary,
	// which the kernel may drop and read again).
	RSS, RSSAnon, RSSFile int64
	RSSAfter              int64 // the process's whole VmRSS after building
	BuildNs               int64
}

// tokenMemoryEnv names what the child builds: "koe:MODEL" (a Tokenizer's
// first count), "tiktoken-go:ENCODING" (tiktoken-go's encoding, as koe
// built it before package bpe), or "none".
const tokenMemoryEnv = "KOE_TOKEN_MEMORY_CHILD"

// TestTokenMemoryChild is the child: it prints a tokenMemory as JSON.
func TestTokenMemoryChild(t *testing.T) {
	what := os.Getenv(tokenMemoryEnv)
	if what == "" {
		t.Skip("run by measureTokenMemory in a process of its own")
	}
	kind, name, _ := strings.Cut(what, ":")
	before := readTokenMemory(t)
	start := time.Now()
	var keep any
	switch kind {
	case "koe":
		tk := NewTokenizer(name)
		tk.Count("warm up")
		keep = tk
	case "tiktoken-go":
		tk := refTiktoken(t, name)
		tk.EncodeOrdinary("warm up")
		keep = tk
	case "none":
	default:
		t.Fatalf("%s=%q: want koe:MODEL, tiktoken-go:ENCODING or none", tokenMemoryEnv, what)
	}
	build := time.Since(start)
	after := readTokenMemory(t)
	runtime.KeepAlive(keep)
	out, err := json.Marshal(tokenMemory{
		HeapAlloc: after.HeapAlloc - before.HeapAlloc,
		HeapInuse: after.HeapInuse - before.HeapInuse,
		ScanHeap:  after.ScanHeap - before.ScanHeap,
		RSS:       after.RSS - before.RSS,
		RSSAnon:   after.RSSAnon - before.RSSAnon,
		RSSFile:   after.RSSFile - before.RSSFile,
		RSSAfter:  after.RSS,
		BuildNs:   build.Nanoseconds(),
	})
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.Write(append([]byte("TOKENMEMORY "), append(out, '\n')...))
}

// readTokenMemory collects, returns memory to the system, and reads the
// process's memory.
func readTokenMemory(t *testing.T) tokenMemory {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	sample := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		t.Fatal("this Go has no /gc/scan/heap:bytes")
	}
	status := procStatus(t)
	return tokenMemory{
		HeapAlloc: int64(ms.HeapAlloc),
		HeapInuse: int64(ms.HeapInuse),
		ScanHeap:  int64(sample[0].Value.Uint64()),
		RSS:       status["VmRSS"],
		RSSAnon:   status["RssAnon"],
		RSSFile:   status["RssFile"],
	}
}

// procStatus returns the sizes in /proc/self/status, in bytes, by name.
func procStatus(t *testing.T) map[string]int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	sizes := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		rest, isKB := strings.CutSuffix(strings.TrimSpace(rest), " kB")
		if !ok || !isKB {
			continue
		}
		kb, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			t.Fatalf("/proc/self/status %q: %v", line, err)
		}
		sizes[name] = kb << 10
	}
	if sizes["VmRSS"] == 0 {
		t.Fatal("no VmRSS in /proc/self/status")
	}
	return sizes
}

// measureTokenMemory runs the child building what (see tokenMemoryEnv).
func measureTokenMemory(tb testing.TB, what string) tokenMemory {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTokenMemoryChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), tokenMemoryEnv+"="+what, "GOGC=100", "GOMEMLIMIT=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("child %s: %v\n%s", what, err, out)
	}
	_, line, ok := bytes.Cut(out, []byte("TOKENMEMORY "))
	if !ok {
		tb.Fatalf("child %s printed no measurement:\n%s", what, out)
	}
	line, _, _ = bytes.Cut(line, []byte("\n"))
	var m tokenMemory
	if err := json.Unmarshal(line, &m); err != nil {
		tb.Fatalf("child %s: %v in %q", what, err, line)
	}
	return m
}

// The vocabulary a Tokenizer builds holds no pointers: the garbage
// collector has nothing in it to scan, and the process keeps a few
// megabytes for it, not tens (tiktoken-go's maps: 22 MiB of live heap for
// o200k_base, all of it scanned).
func TestTokenizerVocabularyIsNotScanned(t *testing.T) {
	for _, model := range []string{"gpt-4o", "gpt-4"} {
		m := measureTokenMemory(t, "koe:"+model)
		t.Logf("%s: live heap +%.1f MiB, scanned heap +%.2f MiB, RSS +%.1f MiB (anonymous %.1f, file %.1f), built in %v", model,
			mib(m.HeapAlloc), mib(m.ScanHeap), mib(m.RSS), mib(m.RSSAnon), mib(m.RSSFile), time.Duration(m.BuildNs).Round(time.Millisecond))
		if m.ScanHeap > 1<<20 {
			t.Errorf("%s: building the vocabulary added %.1f MiB of heap the collector scans, want under 1", model, mib(m.ScanHeap))
		}
		if m.HeapAlloc > 8<<20 {
			t.Errorf("%s: building the vocabulary added %.1f MiB of live heap, want under 8", model, mib(m.HeapAlloc))
		}
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// BenchmarkTokenizerMemory reports what building each vocabulary adds to
// a fresh process, with package bpe's table (koe) and with tiktoken-go's
// maps (what koe built before): live heap, heap the collector scans,
// resident set (after returning free memory to the system), and the build
// time. Each iteration is a process of its own; use -benchtime 3x or so.
func BenchmarkTokenizerMemory(b *testing.B) {
	for _, c := range []struct{ name, what string }{
		{"table/o200k_base", "koe:gpt-4o"},
		{"tiktoken-go/o200k_base", "tiktoken-go:o200k_base"},
		{"table/cl100k_base", "koe:gpt-4"},
		{"tiktoken-go/cl100k_base", "tiktoken-go:cl100k_base"},
		{"none", "none"},
	} {
		b.Run(c.name, func(b *testing.B) {
			var sum tokenMemory
			for b.Loop() {
				m := measureTokenMemory(b, c.what)
				sum.HeapAlloc += m.HeapAlloc
				sum.ScanHeap += m.ScanHeap
				sum.RSS += m.RSS
				sum.RSSAnon += m.RSSAnon
				sum.RSSFile += m.RSSFile
				sum.RSSAfter += m.RSSAfter
				sum.BuildNs += m.BuildNs
			}
			n := float64(b.N)
			b.ReportMetric(mib(sum.HeapAlloc)/n, "live-MiB")
			b.ReportMetric(mib(sum.ScanHeap)/n, "scan-MiB")
			b.ReportMetric(mib(sum.RSS)/n, "rss-added-MiB")
			b.ReportMetric(mib(sum.RSSAnon)/n, "anon-added-MiB")
			b.ReportMetric(mib(sum.RSSFile)/n, "file-added-MiB")
			b.ReportMetric(mib(sum.RSSAfter)/n, "rss-MiB")
			b.ReportMetric(float64(sum.BuildNs)/n/1e6, "build-ms")
		})
	}
}

// BenchmarkTokenizerBuild measures building a vocabulary in-process, in
// time and allocations (package bpe's table; a Tokenizer builds it once).
func BenchmarkTokenizerBuild(b *testing.B) {
	for _, name := range []string{EncodingO200k, EncodingCL100k} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bpe.Load(name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
