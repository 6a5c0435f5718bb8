package recall

import (
	"context"
	"slices"

	"koe/textindex"
)

// Ranking weighs what a message's score is made of. Every part is a share
// of a BM25 score, so the weights are comparable whatever the query. The
// defaults were chosen by leave-one-conversation-out on LoCoMo (`koe eval
// locomo -loo`, docs/memory.md): each weight is the one that found most
// on conversations it was not chosen on.
type Ranking struct {
	// Near and Far weigh the scores of the messages one and two (or more,
	// up to Window) places away in the same session: evidence is often a
	// reply to a question that holds the words, or the message after one
	// that does.
	Near, Far float64
	// Window is how many places either way a message lends its score
	// (1 to maxWindow; 0 means 2).
	Window int
	// Session weighs the session's score (the sum of its messages',
	// scaled to the best message's): a session about the subject lifts
	// all of its messages a little.
	Session float64
	// Named multiplies the score of a message by a person the query names.
	Named float64
	// Summaries lets the agent's summaries that match the query lift the
	// messages of the turns they cover.
	Summaries bool
	// Temporal, for a question that asks when (or names a month or a
	// year), multiplies by 1+Temporal the score of the messages that say
	// when something happened ("yesterday", "last week", a date) and of
	// the sessions of the month or year named (temporal.go).
	Temporal float64
	// Feedback weighs a second round of retrieval seeded by the words of
	// the first round's best messages (names, places, things): the other
	// half of a question about two occasions rarely shares its words, but
	// often shares the first half's (feedback.go).
	Feedback float64
	// Spread, below 1, counts each further candidate of a session Spread
	// times the one before it, so that a block holds several sessions
	// rather than all of one (0 or 1: off).
	Spread float64
	// Coverage scores a session by how many of the query's words it
	// holds, each counted once at its best message, rather than by the
	// sum of its messages' scores: a session that says one of the words
	// twenty times no longer outweighs one that says all of them
	// (coverage.go).
	Coverage bool
	// QueryStops drops the words that frame a question rather than name
	// its subject ("likely", "kind", "mention") before it is scored
	// (querywords.go). The index's own stop words apply either way.
	QueryStops bool
	// SpeakerFrom, from a block of this many tokens up (0: never), leaves
	// the names of the people who spoke out of the first round's words:
	// a question naming one gets what they said (Named), not every
	// greeting that says their name (speakers.go).
	SpeakerFrom int
}

// DefaultRanking is what live turns and the evaluation use.
var DefaultRanking = Ranking{Near: 0.4, Far: 0.1, Window: 2, Session: 0.3, Named: 2.5, Summaries: true, Temporal: 1, Feedback: 0.5, Coverage: true, SpeakerFrom: 1000}

// rrfK is the reciprocal-rank-fusion constant (the usual 60).
const rrfK = 60

// maxWindow bounds Ranking.Window: past three places a message's
// neighbours are another subject.
const maxWindow = 3

// window is rk's Window within its bounds.
func (rk Ranking) window() int {
	if rk.Window <= 0 {
		return 2
	}
	return min(rk.Window, maxWindow)
}

// ranked is one candidate message.
type ranked struct {
	id    textindex.DocID
	score float64
}

// rankLocked orders the character's messages for a query, best first,
// keeping at most limit, for a block of budget tokens. exclude says which
// messages may not be returned (they still lend their score to their
// neighbours). qvec, if set, adds a vector ranking. Called with c.mu
// read-locked.
func (c *character) rankLocked(q string, rk Ranking, exclude func(*entry) bool, qvec []float32, budget, limit int) []ranked {
	words := textindex.Words(q)
	terms := queryTerms(q, words, rk)
	named := map[string]bool{}
	for _, w := range words {
		if c.names[w] {
			named[w] = true
		}
	}
	first := terms
	if rk.SpeakerFrom > 0 && budget >= rk.SpeakerFrom {
		first = withoutSpeakers(terms, named)
	}
	hits := c.words.Score(first)
	if rk.Feedback > 0 {
		hits = c.feedbackLocked(hits, terms, rk.Feedback, limit)
	}
	own := make(map[textindex.DocID]float64, len(hits))
	sess := map[int]float64{}
	best, bestSess := 0.0, 0.0
	for _, h := range hits {
		own[h.ID] = h.Score
		best = max(best, h.Score)
		s := c.entries[h.ID].session
		sess[s] += h.Score
		bestSess = max(bestSess, sess[s])
	}
	if rk.Coverage {
		sess, bestSess = c.coverageLocked(terms)
	}
	var when timeQuestion
	if rk.Temporal > 0 {
		when = askedWhen(words)
	}
	win := rk.window()

	// The best hits and their neighbours are candidates: a message
	// without the words may be the answer to one with them. Weak hits
	// (a common word in a large index) still count in their session's
	// and neighbours' scores, but are not expanded: that keeps a query's
	// cost bounded by what a block can hold, not by the index's size.
	expand := hits
	if n := 8 * limit; len(hits) > n {
		expand = textindex.Top(slices.Clone(hits), n)
	}
	cand := make(map[textindex.DocID]float64, len(expand)*3)
	for _, h := range expand {
		e := &c.entries[h.ID]
		docs := c.sessions[e.session].docs
		for p := max(0, e.pos-win); p <= min(len(docs)-1, e.pos+win); p++ {
			cand[docs[p]] = 0
		}
	}
	var keyword []textindex.Hit
	for id := range cand {
		e := &c.entries[id]
		if e.dead || (exclude != nil && exclude(e)) {
			continue
		}
		docs := c.sessions[e.session].docs
		score := own[id]
		for d := 1; d <= win; d++ {
			w := rk.Near
			if d >= 2 {
				w = rk.Far
			}
			if e.pos-d >= 0 {
				score += w * own[docs[e.pos-d]]
			}
			if e.pos+d < len(docs) {
				score += w * own[docs[e.pos+d]]
			}
		}
		if bestSess > 0 {
			score += rk.Session * best * sess[e.session] / bestSess
		}
		if rk.Named > 0 && named[e.nameKey] {
			score *= rk.Named
		}
		if when.asked && (e.saysWhen || when.matches(c.sessions[e.session].start)) {
			score *= 1 + rk.Temporal
		}
		keyword = append(keyword, textindex.Hit{ID: id, Score: score})
	}
	if rk.Spread > 0 && rk.Spread < 1 {
		keyword = c.spreadLocked(keyword, rk.Spread, limit)
	}
	keyword = textindex.Top(keyword, limit)

	lists := [][]textindex.Hit{keyword}
	if qvec != nil {
		lists = append(lists, c.nearestLocked(qvec, exclude, limit))
	}
	if rk.Summaries {
		if s := c.summaryHitsLocked(terms, exclude, limit); len(s) > 0 {
			lists = append(lists, s)
		}
	}
	fused := keyword
	if len(lists) > 1 {
		fused = textindex.Top(textindex.Fuse(rrfK, lists...), limit)
	}
	out := make([]ranked, len(fused))
	for i, h := range fused {
		out[i] = ranked{id: h.ID, score: h.Score}
	}
	return out
}

// nearestLocked ranks messages by cosine similarity to qvec (vectors are
// unit length, so a dot product).
func (c *character) nearestLocked(qvec []float32, exclude func(*entry) bool, limit int) []textindex.Hit {
	var hits []textindex.Hit
	for i := range c.entries {
		e := &c.entries[i]
		if e.dead || len(e.vector) != len(qvec) || (exclude != nil && exclude(e)) {
			continue
		}
		var dot float32
		for j, x := range qvec {
			dot += x * e.vector[j]
		}
		hits = append(hits, textindex.Hit{ID: textindex.DocID(i), Score: float64(dot)})
	}
	return textindex.Top(hits, limit)
}

// summaryHitsLocked ranks the messages of the turns that the best
// matching summaries cover, summary by summary.
func (c *character) summaryHitsLocked(terms []string, exclude func(*entry) bool, limit int) []textindex.Hit {
	const summariesUsed = 3
	top := textindex.Top(c.sums.Score(terms), summariesUsed)
	var out []textindex.Hit
	for _, h := range top {
		d := c.sumDocs[h.ID]
		if d.dead {
			continue
		}
		for _, id := range c.turnDocsLocked(d.history, d.turns) {
			if exclude != nil && exclude(&c.entries[id]) {
				continue
			}
			out = append(out, textindex.Hit{ID: id, Score: h.Score})
			if len(out) == limit {
				return out
			}
		}
	}
	return out
}

// embedQuery embeds a live turn's message within the query timeout; nil
// means rank by keywords (no endpoint, no vectors yet, or it failed).
func (s *Service) embedQuery(ctx context.Context, c *character, text string) []float32 {
	if s.opts.Embedder == nil {
		return nil
	}
	c.mu.RLock()
	some := c.live > c.missing
	c.mu.RUnlock()
	if !some {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	vecs, err := s.opts.Embedder.Embed(qctx, []string{text})
	if err != nil || len(vecs) != 1 {
		// A slow endpoint is logged like a failing one; a turn that
		// was stopped is nobody's failure.
		if err != nil && ctx.Err() == nil {
			s.embedOutcome(err)
		}
		return nil
	}
	return vecs[0]
}
