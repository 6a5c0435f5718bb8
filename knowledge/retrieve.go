package knowledge

import (
	"context"
	"fmt"
	"strings"
	"time"

	"koe/textindex"
)

// Passage is what a turn reads of a knowledge base: a whole document, or
// a chunk retrieved for the question.
type Passage struct {
	DocID   string
	Name    string // the file's name
	Title   string
	Heading string
	Page    int
	Text    string
	Tokens  int
}

// Mode says when a turn reads passages.
type Mode int

const (
	// Auto reads passages when the best one holds enough of the
	// question's keywords (knowledge.min_match).
	Auto Mode = iota
	// Always reads the best passages, however weak (the LLM router chose
	// retrieval, or the model called the search tool).
	Always
	// WholeOnly reads the documents when they fit whole and nothing
	// otherwise: what a turn does before the LLM router has decided.
	WholeOnly
)

// Query is what a turn asks of its character's knowledge base.
type Query struct {
	ConfUID string
	Text    string
	// InputBudget is the model's input budget in tokens: whole documents
	// may take knowledge.whole_share of it.
	InputBudget int
	// Budget is the most tokens of retrieved passages (0: knowledge.budget).
	Budget int
	Mode   Mode
	// OnSearch, if set, is called just before the index is searched.
	OnSearch func()
}

// Result is what a turn reads.
type Result struct {
	Passages []Passage
	// Whole: the passages are the whole knowledge base, which fits.
	Whole bool
	// Searched: the index was searched (a knowledge base too large to
	// read whole); Match is then the best passage's share of the
	// question's keywords, and Vectors whether vectors took part.
	Searched bool
	Match    float64
	Matched  int // how many of the question's keywords the best passage holds
	Vectors  bool
	// Titles name the knowledge base's documents (their titles, or file
	// names), oldest first.
	Titles []string
}

// Has reports whether conf has a knowledge base at all.
func (s *Service) Has(ctx context.Context, conf string) (bool, error) {
	docs, err := s.docs(ctx, conf)
	return len(docs) > 0, err
}

// Read answers a turn: the whole knowledge base when it fits in its share
// of the input budget, else the best passages for the question within the
// budget (or none: see Mode). A character without documents gets nothing,
// at the cost of a map lookup.
func (s *Service) Read(ctx context.Context, q Query) (Result, error) {
	b, err := s.base(ctx, q.ConfUID)
	if err != nil || len(b.docs) == 0 {
		return Result{}, err
	}
	res := Result{Titles: b.titles()}
	if b.tokens <= int(float64(q.InputBudget)*s.cfg.WholeShare) {
		whole, err := s.whole(ctx, q.ConfUID, b)
		if err != nil {
			return Result{}, err
		}
		res.Passages, res.Whole = whole, true
		return res, nil
	}
	if q.Mode == WholeOnly {
		return res, nil
	}
	if err := s.waitReady(ctx); err != nil {
		return Result{}, err
	}
	budget := q.Budget
	if budget <= 0 {
		budget = s.cfg.Budget
	}
	if q.OnSearch != nil {
		q.OnSearch()
	}
	hits, vectors, err := s.search(ctx, q.ConfUID, q.Text, budget)
	if err != nil {
		return Result{}, err
	}
	res.Searched, res.Vectors = true, vectors
	if len(hits) == 0 {
		return res, nil
	}
	res.Match, res.Matched = match(q.Text, keywordEvidence(hits))
	if q.Mode == Auto && (res.Match < s.cfg.MinMatch || res.Matched < s.cfg.MinKeywords) {
		return res, nil
	}
	res.Passages = pack(hits, budget)
	return res, nil
}

// Search returns the best passages for text within budget tokens (0:
// knowledge.budget), however weak: the search tool's answer.
func (s *Service) Search(ctx context.Context, conf, text string, budget int) ([]Passage, error) {
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	if budget <= 0 {
		budget = s.cfg.Budget
	}
	hits, _, err := s.search(ctx, conf, text, budget)
	if err != nil {
		return nil, err
	}
	return pack(hits, budget), nil
}

// search asks the index, with the question's vector when it can have one
// in time.
func (s *Service) search(ctx context.Context, conf, text string, budget int) ([]Hit, bool, error) {
	q := SearchQuery{Text: text, Limit: searchLimit(budget, s.cfg.ChunkTokens)}
	if s.opts.Embedder != nil && s.opts.Index.Vectors() {
		q.Vector = s.queryVector(ctx, text)
	}
	hits, err := s.opts.Index.Search(ctx, conf, q)
	if err != nil {
		return nil, false, fmt.Errorf("knowledge: search: %w", err)
	}
	return hits, q.Vector != nil, nil
}

// queryVector embeds the question, or gives nil when the endpoint fails or
// is slow: the turn then ranks by keywords, never waits or fails for it.
func (s *Service) queryVector(ctx context.Context, text string) []float32 {
	start := time.Now()
	v, err := s.opts.Embedder.EmbedQuery(ctx, text)
	if !s.embedOutcome(ctx, err) {
		return nil
	}
	s.log.Debug("knowledge: question embedded", "took", time.Since(start))
	return v
}

// searchLimit is how many hits to ask for: enough to fill the budget with
// chunks of half the usual size, and a few to spare for the ones that do
// not fit.
func searchLimit(budget, chunkTokens int) int {
	return min(max(2*budget/max(chunkTokens, 1)+4, 8), 64)
}

// pack takes the best hits that fit budget tokens together, best first;
// a hit too large for what is left is passed over for smaller ones.
func pack(hits []Hit, budget int) []Passage {
	var out []Passage
	left := budget
	for _, h := range hits {
		if h.Tokens > left {
			continue
		}
		left -= h.Tokens
		out = append(out, passage(h.Chunk))
	}
	return out
}

func passage(c Chunk) Passage {
	return Passage{DocID: c.DocID, Name: c.Name, Title: c.Title, Heading: c.Heading, Page: c.Page, Text: c.Text, Tokens: c.Tokens}
}

// keywordEvidence is the chunk the auto router judges a question by: the
// one that ranks first by keywords, when the store tells, wherever vectors
// put it; else the first hit. An embedding model that knows nothing of the
// documents must not make the router read nothing, nor read what only the
// model thinks bears on the question.
func keywordEvidence(hits []Hit) Chunk {
	for _, h := range hits {
		if h.KeywordBest {
			return h.Chunk
		}
	}
	return hits[0].Chunk
}

// match is the share of the question's distinct keywords the chunk holds
// (in its text, heading or title), and their number, whatever the store's
// own scores: the auto router's measure of whether the knowledge base
// speaks to the question at all. A question of stop words only matches
// nothing.
func match(question string, c Chunk) (float64, int) {
	want := map[string]bool{}
	// as maps a term the ranking widened the question with to the
	// question's own term, which a chunk holding it is counted as holding.
	as := map[string]string{}
	for _, t := range textindex.Terms(question) {
		want[t] = true
		if keywordParams.Related > 0 {
			for _, r := range textindex.Related(t) {
				if _, ok := as[r]; !ok {
					as[r] = t
				}
			}
		}
	}
	if len(want) == 0 {
		return 0, 0
	}
	found := 0
	for _, t := range textindex.Terms(c.Title + "\n" + c.Heading + "\n" + c.Text) {
		if !want[t] {
			t = as[t]
		}
		if want[t] {
			found++
			delete(want, t)
		}
	}
	return float64(found) / float64(found+len(want)), found
}

// whole is the whole knowledge base as passages, one per document, read
// once while the list stays unchanged.
func (s *Service) whole(ctx context.Context, conf string, b *base) ([]Passage, error) {
	s.mu.Lock()
	cached := b.whole
	s.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	out := make([]Passage, 0, len(b.docs))
	for _, d := range b.docs {
		text, _, err := s.opts.Docs.KnowledgeText(ctx, conf, d.ID)
		if err != nil {
			return nil, fmt.Errorf("knowledge: text of %s: %w", d.Name, err)
		}
		title := d.Title
		if title == "" {
			title = d.Name
		}
		out = append(out, Passage{DocID: d.ID, Name: d.Name, Title: title, Text: strings.TrimSpace(text), Tokens: d.Tokens})
	}
	s.mu.Lock()
	b.whole = out
	s.mu.Unlock()
	return out, nil
}

func (b *base) titles() []string {
	out := make([]string, len(b.docs))
	for i, d := range b.docs {
		out[i] = d.Title
		if out[i] == "" {
			out[i] = d.Name
		}
	}
	return out
}
