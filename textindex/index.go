package textindex

import (
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// DocID names a document of an Index: ids are dense, handed out 0, 1, 2, …
// in order of Add and never reused, so callers keep their documents in a
// slice indexed by DocID.
type DocID uint32

// Params of BM25. Zero values mean the defaults K1 = 1.2, B = 0.75; since
// that leaves no way to write B = 0, NoLengthNorm stands for it.
type Params struct {
	K1, B float64
	// Related, between 0 and 1, widens every query with the terms the
	// built-in table relates to its terms (see related.go), each weighing
	// Related times a query term; irregular forms of a query word weigh as
	// much as the word. 0 (the default) widens nothing. Out-of-range values
	// are clamped.
	Related float64
}

// NoLengthNorm as Params.B turns length normalisation off (BM25 with b = 0):
// a long document scores like a short one with the same term frequencies.
const NoLengthNorm = -1.0

const (
	defaultK1 = 1.2
	defaultB  = 0.75
)

// Index is a BM25 inverted index, safe for concurrent use: Add and Remove
// take the write lock, Score the read lock.
type Index struct {
	k1, b   float64
	related float64 // Params.Related

	mu     sync.RWMutex
	termID map[string]uint32 // the one copy of each term string
	lists  []postings        // by term id
	docLen []uint32          // by DocID, in terms; kept for dead documents too
	dead   []uint64          // bitmap by DocID

	live    int    // documents added and not removed
	liveLen uint64 // sum of docLen over live documents

	// epoch counts removals; a list's cached live count is valid only for
	// the epoch it was taken in.
	epoch uint32
	// unswept counts documents removed since every list was last compacted,
	// so possibly still present in some postings.
	unswept int
}

// postings is one term's inverted list: parallel slices kept in ascending
// DocID order (Add appends the newest id), so a document's entry is the
// last one while it is being added.
type postings struct {
	docs []DocID
	tfs  []uint16 // saturates at 65535; BM25 saturates long before

	// counted packs epoch<<32 | live documents in docs as of that epoch.
	// Score stores it under the read lock, hence atomic; concurrent
	// readers under one epoch compute and store the same value.
	counted atomic.Uint64
}

// New makes an empty index scoring with p.
func New(p Params) *Index {
	ix := &Index{k1: p.K1, b: p.B, termID: map[string]uint32{}}
	if !(ix.k1 > 0) || math.IsInf(ix.k1, 0) { // also catches NaN
		ix.k1 = defaultK1
	}
	switch {
	case !(p.Related > 0): // also NaN
	case p.Related > 1:
		ix.related = 1
	default:
		ix.related = p.Related
	}
	switch {
	case ix.b == 0 || math.IsNaN(ix.b):
		ix.b = defaultB
	case ix.b < 0:
		ix.b = 0
	case ix.b > 1:
		ix.b = 1
	}
	return ix
}

// Add indexes a document given its terms (as Terms returns them) and returns
// its id. A document without terms still counts in N and in the average
// length, as it would in any other BM25 index.
func (ix *Index) Add(terms []string) DocID {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if uint64(len(ix.docLen)) > math.MaxUint32 {
		panic("textindex: more than 2^32 documents in one index")
	}
	id := DocID(len(ix.docLen))
	ix.docLen = append(ix.docLen, uint32(len(terms)))
	if need := int(id)/64 + 1; len(ix.dead) < need {
		ix.dead = append(ix.dead, 0)
	}
	ix.live++
	ix.liveLen += uint64(len(terms))
	for _, t := range terms {
		tid, ok := ix.termID[t]
		if !ok {
			tid = uint32(len(ix.lists))
			// Clone: t may be a slice of a caller's much longer string.
			ix.termID[strings.Clone(t)] = tid
			ix.lists = append(ix.lists, postings{})
			ix.lists[tid].counted.Store(uint64(ix.epoch) << 32)
		}
		p := &ix.lists[tid]
		if n := len(p.docs); n > 0 && p.docs[n-1] == id {
			if p.tfs[n-1] < math.MaxUint16 {
				p.tfs[n-1]++
			}
			continue
		}
		p.docs = append(p.docs, id)
		p.tfs = append(p.tfs, 1)
		if c := p.counted.Load(); uint32(c>>32) == ix.epoch {
			p.counted.Store(c + 1)
		}
	}
	return id
}

// Remove drops a document; its id is never returned by Score again.
// Removing twice, or an id never handed out, is a no-op.
func (ix *Index) Remove(id DocID) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if int(id) >= len(ix.docLen) || ix.isDead(id) {
		return
	}
	ix.dead[id/64] |= 1 << (id % 64)
	ix.live--
	ix.liveLen -= uint64(ix.docLen[id])
	ix.unswept++
	ix.epoch++
	// A quarter of the postings' documents dead: walking them costs more
	// than sweeping them out. A wrapped epoch could make a stale count look
	// fresh; the sweep recounts every list.
	if ix.unswept*4 > ix.live+ix.unswept || ix.epoch == 0 {
		ix.sweep()
	}
}

// Len is the number of live (not removed) documents.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

func (ix *Index) isDead(id DocID) bool {
	return ix.dead[id/64]&(1<<(id%64)) != 0
}

// liveCount is the number of live documents in p, counted once per epoch.
// Caller holds at least the read lock.
func (ix *Index) liveCount(p *postings) int {
	c := p.counted.Load()
	if uint32(c>>32) == ix.epoch {
		return int(uint32(c))
	}
	n := 0
	for _, d := range p.docs {
		if !ix.isDead(d) {
			n++
		}
	}
	p.counted.Store(uint64(ix.epoch)<<32 | uint64(n))
	return n
}

// worthCompacting reports whether dead entries are a large enough share of
// p, whose live count is n, to rewrite it rather than skip them on every walk.
func worthCompacting(p *postings, n int) bool {
	dead := len(p.docs) - n
	return dead >= 8 && dead*4 > len(p.docs)
}

// compact drops p's dead entries. Caller holds the write lock.
func (ix *Index) compact(p *postings) {
	j := 0
	for i, d := range p.docs {
		if !ix.isDead(d) {
			p.docs[j], p.tfs[j] = d, p.tfs[i]
			j++
		}
	}
	if j == len(p.docs) {
		p.counted.Store(uint64(ix.epoch)<<32 | uint64(j))
		return
	}
	if j <= cap(p.docs)/2 { // give the memory back, not just the length
		p.docs = slices.Clone(p.docs[:j])
		p.tfs = slices.Clone(p.tfs[:j])
	} else {
		p.docs, p.tfs = p.docs[:j], p.tfs[:j]
	}
	if j == 0 {
		p.docs, p.tfs = nil, nil
	}
	p.counted.Store(uint64(ix.epoch)<<32 | uint64(j))
}

// sweep compacts every list. Caller holds the write lock.
func (ix *Index) sweep() {
	for i := range ix.lists {
		ix.compact(&ix.lists[i])
	}
	ix.unswept = 0
}
