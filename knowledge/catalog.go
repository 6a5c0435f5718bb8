package knowledge

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"koe/textindex"
)

// catalog is the in-memory part of the memory and local stores: per
// character, a BM25 index over its chunks and, when it keeps vectors,
// their unit-length embeddings for brute-force cosine search. The memory
// store is a catalog alone; the local store writes through to bbolt and
// refills a catalog from it at start.
type catalog struct {
	vectors bool // keep and search embeddings

	mu      sync.RWMutex
	shelves map[string]*shelf // by conf
}

func newCatalog(vectors bool) *catalog {
	return &catalog{vectors: vectors, shelves: map[string]*shelf{}}
}

// shelf is one character's chunks. Its textindex locks itself too, which
// costs nothing uncontended; the catalog's lock guards the rest.
type shelf struct {
	words   *textindex.Index
	entries []*entry // by DocID; nil once removed (DocIDs are never reused)
	byDoc   map[string][]textindex.DocID
	// matrices hold the vectors by dimension, so that a query meets only
	// vectors it can be compared with; a character's vectors normally
	// share one dimension, two only while an embeddings model changes.
	matrices map[int]*matrix
}

// entry is a chunk as kept: its vector, if any, lives in a matrix.
type entry struct {
	chunk Chunk // Vector nil
	dim   int   // 0: no vector
	row   int   // its row in the matrix of its dimension, when dim > 0
}

// matrix is vectors of one dimension in one contiguous slice, row r at
// data[r*dim:], so a search streams through memory once.
type matrix struct {
	dim  int
	data []float32
	ids  []textindex.DocID // by row
	dead int               // rows whose chunk was removed
}

// prepared is a chunk ready to enter a shelf: analysed and normalised
// outside the lock, which is where the time goes.
type prepared struct {
	chunk  Chunk
	terms  []string
	vector []float32 // unit length, or nil
}

// chunkTerms is what a chunk is found by. The heading and the document's
// title go in with the text: a manual's chunk under "Replacing the
// filter" is about filters even when its sentences only say "it".
func chunkTerms(c Chunk) []string {
	terms := textindex.Terms(c.Title)
	terms = append(terms, textindex.Terms(c.Heading)...)
	return append(terms, textindex.Terms(c.Text)...)
}

// prepare checks chunks for document docID and analyses them. A chunk's
// DocID must be docID or empty (then filled in); seqs must be distinct and
// not negative. With vectors, the vectors given must share one dimension
// and hold finite values; they are copied and normalised. A chunk without
// one is still found by its words.
func (c *catalog) prepare(docID string, chunks []Chunk) ([]prepared, error) {
	if docID == "" {
		return nil, errors.New("document id is empty")
	}
	out := make([]prepared, len(chunks))
	seen := make(map[int]bool, len(chunks))
	dim := -1
	for i, ch := range chunks {
		if ch.DocID != "" && ch.DocID != docID {
			return nil, fmt.Errorf("chunk %d belongs to document %q, not %q", ch.Seq, ch.DocID, docID)
		}
		if ch.Seq < 0 || seen[ch.Seq] {
			return nil, fmt.Errorf("chunk seq %d is negative or repeated", ch.Seq)
		}
		seen[ch.Seq] = true
		ch.DocID = docID
		p := prepared{terms: chunkTerms(ch)}
		if c.vectors && ch.Vector != nil {
			if dim >= 0 && len(ch.Vector) != dim {
				return nil, fmt.Errorf("chunk %d has a %d-dimensional vector, chunk %d one of %d: one document's vectors come from one model",
					ch.Seq, len(ch.Vector), chunks[0].Seq, dim)
			}
			dim = len(ch.Vector)
			v, err := unit(ch.Vector)
			if err != nil {
				return nil, fmt.Errorf("chunk %d: %w", ch.Seq, err)
			}
			p.vector = v
		}
		ch.Vector = nil
		p.chunk = ch
		out[i] = p
	}
	return out, nil
}

// unit returns a normalised copy of v, so that cosine similarity is a dot
// product. A zero vector stays zero: it is similar to nothing.
func unit(v []float32) ([]float32, error) {
	if len(v) == 0 {
		return nil, errors.New("vector is empty")
	}
	var sum float64
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, errors.New("vector holds a value that is not a finite number")
		}
		sum += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if sum == 0 {
		return out, nil
	}
	scale := 1 / math.Sqrt(sum)
	for i, x := range v {
		out[i] = float32(float64(x) * scale)
	}
	return out, nil
}

// put replaces document docID's chunks in conf's shelf with ps.
func (c *catalog) put(conf, docID string, ps []prepared) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shelves[conf]
	if s == nil {
		if len(ps) == 0 {
			return
		}
		s = &shelf{words: textindex.New(keywordParams), byDoc: map[string][]textindex.DocID{}, matrices: map[int]*matrix{}}
		c.shelves[conf] = s
	}
	s.removeLocked(docID)
	if len(ps) > 0 {
		ids := make([]textindex.DocID, len(ps))
		for i, p := range ps {
			ids[i] = s.addLocked(p)
		}
		s.byDoc[docID] = ids
	}
	if len(s.byDoc) == 0 {
		delete(c.shelves, conf) // and with it every dead slot
	}
}

// delete removes document docID's chunks from conf's shelf.
func (c *catalog) delete(conf, docID string) { c.put(conf, docID, nil) }

func (s *shelf) addLocked(p prepared) textindex.DocID {
	id := s.words.Add(p.terms)
	e := &entry{chunk: p.chunk}
	if int(id) != len(s.entries) {
		// textindex hands out dense ids in order of Add, and only this
		// shelf adds to its index.
		panic(fmt.Sprintf("knowledge: textindex id %d out of step with %d entries", id, len(s.entries)))
	}
	s.entries = append(s.entries, e)
	if p.vector != nil {
		e.dim = len(p.vector)
		m := s.matrices[e.dim]
		if m == nil {
			m = &matrix{dim: e.dim}
			s.matrices[e.dim] = m
		}
		e.row = len(m.ids)
		m.data = append(m.data, p.vector...)
		m.ids = append(m.ids, id)
	}
	return id
}

func (s *shelf) removeLocked(docID string) {
	ids, ok := s.byDoc[docID]
	if !ok {
		return
	}
	delete(s.byDoc, docID)
	for _, id := range ids {
		s.words.Remove(id)
		e := s.entries[id]
		s.entries[id] = nil
		if e.dim == 0 {
			continue
		}
		m := s.matrices[e.dim]
		m.dead++
		if m.dead*2 >= len(m.ids) {
			s.compactLocked(m)
		}
	}
}

// compactLocked drops the rows of removed chunks from m, once they are
// half of it: searches pay for every row they walk.
func (s *shelf) compactLocked(m *matrix) {
	j := 0
	for r, id := range m.ids {
		if s.entries[id] == nil {
			continue
		}
		copy(m.data[j*m.dim:(j+1)*m.dim], m.data[r*m.dim:(r+1)*m.dim])
		m.ids[j] = id
		s.entries[id].row = j
		j++
	}
	if j == 0 {
		delete(s.matrices, m.dim)
		return
	}
	// Give the memory back rather than keep a slice sized for the peak.
	m.data = append([]float32(nil), m.data[:j*m.dim]...)
	m.ids = append([]textindex.DocID(nil), m.ids[:j]...)
	m.dead = 0
}

// search ranks conf's chunks for q: BM25 over the query's terms, fused
// by reciprocal rank with cosine similarity when q has a vector and the
// catalog keeps vectors.
func (c *catalog) search(conf string, q SearchQuery) ([]Hit, error) {
	if q.Limit < 1 {
		return nil, fmt.Errorf("search limit %d, want at least 1", q.Limit)
	}
	var qvec []float32
	if c.vectors && q.Vector != nil {
		v, err := unit(q.Vector)
		if err != nil {
			return nil, fmt.Errorf("query vector: %w", err)
		}
		qvec = v
	}
	terms := textindex.Terms(q.Text)

	c.mu.RLock()
	defer c.mu.RUnlock()
	s := c.shelves[conf]
	if s == nil {
		return nil, nil
	}
	var ranked []textindex.Hit
	best := -1 // the keyword ranking's first, by its place in ranked
	if m := s.matrices[len(qvec)]; qvec != nil && m != nil {
		ranked, best = s.hybridLocked(terms, m, qvec, q.Limit)
	} else if ranked = textindex.Top(s.words.Score(terms), q.Limit); len(ranked) > 0 {
		best = 0
	}
	hits := make([]Hit, len(ranked))
	for i, h := range ranked {
		hits[i] = Hit{Chunk: s.entries[h.ID].chunk, Score: h.Score, KeywordBest: i == best}
	}
	return hits, nil
}

// nearestLocked is the limit rows of m most similar to the unit vector
// q, best first. It keeps a few times limit candidates and cuts them back
// to the best limit when full, rather than scoring every row into one
// slice: a search of 100k chunks would allocate megabytes to keep thirty.
//
// It also gives the mean and standard deviation of every row's
// similarity, dead rows included (they are at most half, and drawn from
// the same model): how far the best stands out of the crowd is what the
// vector ranking's confidence is judged by (see vectorWeight).
func (s *shelf) nearestLocked(m *matrix, q []float32, limit int) ([]textindex.Hit, simStats) {
	buf := make([]textindex.Hit, 0, 4*limit)
	floor := float32(math.Inf(-1)) // a row must beat this to be kept
	var sum, sumSq float64
	for r, id := range m.ids {
		score := dot(q, m.data[r*m.dim:(r+1)*m.dim])
		sum += float64(score)
		sumSq += float64(score) * float64(score)
		if score <= floor || s.entries[id] == nil {
			continue
		}
		if len(buf) == cap(buf) {
			buf = textindex.Top(buf, limit)
			floor = float32(buf[len(buf)-1].Score)
			if score <= floor {
				continue
			}
		}
		buf = append(buf, textindex.Hit{ID: id, Score: float64(score)})
	}
	return textindex.Top(buf, limit), newSimStats(sum, sumSq, len(m.ids))
}

// dot is the inner product of two vectors of equal length, four lanes at
// a time: independent sums let the CPU overlap the multiplications, and
// reslicing (rather than indexing by i) lets the compiler drop the bounds
// checks.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	for len(a) >= 4 && len(b) >= 4 {
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		a, b = a[4:], b[4:]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// len is how many chunks conf has.
func (c *catalog) len(conf string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if s := c.shelves[conf]; s != nil {
		return s.words.Len()
	}
	return 0
}

// confs lists the characters the catalog holds chunks of.
func (c *catalog) confs() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.shelves))
	for conf := range c.shelves {
		out = append(out, conf)
	}
	return out
}

// docs lists the documents the catalog holds chunks of for conf.
func (c *catalog) docs(conf string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s := c.shelves[conf]
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.byDoc))
	for id := range s.byDoc {
		out = append(out, id)
	}
	return out
}
