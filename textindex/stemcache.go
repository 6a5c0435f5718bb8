package textindex

import (
	"hash/maphash"
	"sync"

	"github.com/kljensen/snowball/english"
)

// The stemmer costs about a microsecond a word, most of the time of
// opening an index, while prose repeats a few thousand words over and
// over: a cache of recent stems saves nearly all of it.
//
// The cache's size is not a user limit: it only trades memory for speed,
// never changes a result, and needs no tuning per deployment. It is fixed
// at a size that holds the common vocabulary of English prose (the few
// thousand words that make up most of any text) with room for a corpus's
// own jargon, at a few megabytes at most, whatever the input:
//
//   - stemShards shards, each with two generations of at most
//     stemGeneration entries, so at most 2*stemShards*stemGeneration words;
//   - of at most stemMaxWord bytes each (longer words, which are rare and
//     could be made as long as an attacker likes, are stemmed uncached).
//
// That is 32768 words, under 4 MB even when every word is stemMaxWord
// long, and nearer 2.5 MB for English.
const (
	stemShards     = 64  // enough that cores rarely meet on one lock
	stemGeneration = 256 // entries of one generation of one shard
	stemMaxWord    = 24  // bytes; longer than nearly every English word
)

// stemCache maps words to their stems. Each shard keeps two generations:
// new stems go into the current one, and when it is full it becomes the
// old one and the old one is emptied to be the current one. A word found
// in the old generation moves to the current one, so the words a text
// keeps using survive every turn, while a stream of words never seen
// twice (a hostile one, or a long tail of part numbers) only ever
// replaces the older half. Emptying a whole map, rather than deleting
// entries one by one, reuses its memory as it is.
type stemCache struct {
	seed   maphash.Seed
	limit  int // entries per generation of a shard
	shards []stemShard
}

type stemShard struct {
	mu       sync.Mutex
	cur, old map[string]string
	_        [64]byte // shards that cores lock at once sit on different cache lines
}

func newStemCache(shards, limit int) *stemCache {
	c := &stemCache{seed: maphash.MakeSeed(), limit: limit, shards: make([]stemShard, shards)}
	for i := range c.shards {
		// Unsized: a process that stems little should not pay for a
		// full cache, and a map keeps its size through clear.
		c.shards[i].cur = map[string]string{}
		c.shards[i].old = map[string]string{}
	}
	return c
}

var stems = newStemCache(stemShards, stemGeneration)

// stem is english.Stem of word, a word of lowercase ASCII letters.
func (c *stemCache) stem(word []byte) string {
	if len(word) > stemMaxWord {
		return english.Stem(string(word), false)
	}
	s := &c.shards[maphash.Bytes(c.seed, word)%uint64(len(c.shards))]
	s.mu.Lock()
	// Indexing a map with string(word) does not copy word.
	if stem, ok := s.cur[string(word)]; ok {
		s.mu.Unlock()
		return stem
	}
	if stem, ok := s.old[string(word)]; ok {
		c.insert(s, string(word), stem)
		s.mu.Unlock()
		return stem
	}
	s.mu.Unlock()
	// Stem unlocked: other words of the shard need not wait for it.
	w := string(word)
	stem := english.Stem(w, false)
	if stem == w {
		stem = w // share the memory of the key
	}
	s.mu.Lock()
	c.insert(s, w, stem)
	s.mu.Unlock()
	return stem
}

// insert adds word to s's current generation, turning the generations
// over first if it is full. s.mu must be held.
func (c *stemCache) insert(s *stemShard, word, stem string) {
	if len(s.cur) >= c.limit {
		s.cur, s.old = s.old, s.cur
		clear(s.cur)
	}
	s.cur[word] = stem
}
