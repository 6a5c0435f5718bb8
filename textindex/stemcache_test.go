package textindex

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/kljensen/snowball/english"
)

func stemUncached(word []byte) string { return english.Stem(string(word), false) }

// cacheSize is the number of words c holds, checking each generation of
// each shard keeps to its limit.
func cacheSize(t *testing.T, c *stemCache) int {
	t.Helper()
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		if len(s.cur) > c.limit || len(s.old) > c.limit {
			t.Errorf("shard %d holds %d+%d words, limit %d", i, len(s.cur), len(s.old), c.limit)
		}
		n += len(s.cur) + len(s.old)
		s.mu.Unlock()
	}
	return n
}

func TestTermsCachedMatchUncached(t *testing.T) {
	chunks := proseChunks(t)
	// The tiny cache turns over all the time, the real one rarely: both
	// must give what the stemmer gives, on first sight and from memory.
	tiny := newStemCache(2, 8)
	for pass := range 2 {
		for _, c := range chunks {
			want := terms(c, stemUncached)
			if got := Terms(c); !slices.Equal(got, want) {
				t.Fatalf("pass %d: Terms(%.60q...) = %q, want %q", pass, c, got, want)
			}
			if got := terms(c, tiny.stem); !slices.Equal(got, want) {
				t.Fatalf("pass %d: terms with a tiny cache of %.60q... = %q, want %q", pass, c, got, want)
			}
		}
	}
	if n := cacheSize(t, tiny); n > 2*2*8 {
		t.Errorf("tiny cache holds %d words", n)
	}
	cacheSize(t, stems)
}

func TestStemCacheBounded(t *testing.T) {
	c := newStemCache(4, 32)
	hot := c.stem([]byte("painting"))
	for i := range 100_000 {
		// A stream of words never seen twice, as hostile input could be,
		// with one word the text keeps using.
		word := []byte(fmt.Sprintf("x%dy", i))
		for j := range word {
			word[j] = 'a' + word[j]%26
		}
		if got, want := c.stem(word), english.Stem(string(word), false); got != want {
			t.Fatalf("stem(%q) = %q, want %q", word, got, want)
		}
		if i%50 == 0 {
			if got := c.stem([]byte("painting")); got != "paint" {
				t.Fatalf("stem(painting) = %q", got)
			}
		}
	}
	if n := cacheSize(t, c); n > 2*4*32 {
		t.Errorf("cache holds %d words after a stream of unique ones, limit %d", n, 2*4*32)
	}
	// The word in use was never stemmed again: it is the same string.
	if got := c.stem([]byte("painting")); unsafe.StringData(got) != unsafe.StringData(hot) {
		t.Errorf("a word used every 50 words was evicted by words used once")
	}
	long := []byte(strings.Repeat("painting", 10))
	if got, want := c.stem(long), english.Stem(string(long), false); got != want {
		t.Errorf("stem of a long word = %q, want %q", got, want)
	}
	for i := range c.shards {
		if _, ok := c.shards[i].cur[string(long)]; ok {
			t.Errorf("a word of %d bytes was cached", len(long))
		}
	}
}

func TestStemCacheConcurrent(t *testing.T) {
	chunks := proseChunks(t)
	want := make([][]string, len(chunks))
	for i, c := range chunks {
		want[i] = terms(c, stemUncached)
	}
	tiny := newStemCache(4, 16)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			// Each caller starts elsewhere, so they meet on shards while
			// other words turn the generations over.
			for k := range len(chunks) {
				i := (k + g*len(chunks)/8) % len(chunks)
				stem := stems.stem
				if k%2 == 0 {
					stem = tiny.stem
				}
				if got := terms(chunks[i], stem); !slices.Equal(got, want[i]) {
					errs <- fmt.Errorf("caller %d, chunk %d: got %q, want %q", g, i, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := cacheSize(t, tiny); n > 2*4*16 {
		t.Errorf("tiny cache holds %d words", n)
	}
}

func FuzzStemCache(f *testing.F) {
	for _, s := range []string{"painting", "running", "caresses", "generously", "a", "", "yyyyy", "sky", "news"} {
		f.Add(s)
	}
	tiny := newStemCache(1, 4)
	f.Fuzz(func(t *testing.T, s string) {
		// Any input, made into the lowercase ASCII words the stemmer is
		// for; reusing one buffer checks no entry keeps a caller's bytes.
		word := []byte(s)
		for i := range word {
			word[i] = 'a' + word[i]%26
		}
		want := english.Stem(string(word), false)
		for range 2 {
			for _, c := range []*stemCache{stems, tiny} {
				got := c.stem(word)
				if got != want {
					t.Fatalf("stem(%q) = %q, want %q", word, got, want)
				}
			}
		}
		// The cache must keep its own copy of a word, not the caller's
		// buffer, which the tokenizer reuses for the next word.
		orig := string(word)
		for i := range word {
			word[i] = 'z'
		}
		for _, c := range []*stemCache{stems, tiny} {
			if got := c.stem([]byte(orig)); got != want {
				t.Fatalf("stem(%q) after its buffer was reused = %q, want %q", orig, got, want)
			}
		}
	})
}

func FuzzTermsCached(f *testing.F) {
	for _, s := range []string{"", "Caroline's paintings", "don't RUN running", "東京 2023 cafés", "generously caresses\xffskies"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		want := terms(text, stemUncached)
		for range 2 {
			if got := Terms(text); !slices.Equal(got, want) {
				t.Fatalf("Terms(%q) = %q, want %q", text, got, want)
			}
		}
	})
}
