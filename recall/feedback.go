package recall

import (
	"slices"

	"koe/textindex"
)

// feedbackDocs is how many of the first round's best messages seed the
// second round (Ranking.Feedback). More brings in their small talk.
const feedbackDocs = 3

// feedbackLocked adds to hits (the first round's BM25 scores for terms) a
// second round: the terms of the best feedbackDocs messages that the query
// lacks, scored the same way, weighted so that the second round's best
// weighs weight times the first's. Only the second round's best keep
// hits join: its seeds hold common words too, and every hit it adds is a
// candidate whose neighbours are scored, so without the bound a query
// cost ten times as much at 10k messages. A question about two occasions ("What
// did Ana buy for the trip she planned in May?") finds the message that
// holds its words; that message's own words (the trip's place, a name)
// then find the other occasion. BM25's IDF keeps the seeds' common words
// from counting for much. Called with c.mu read-locked.
func (c *character) feedbackLocked(hits []textindex.Hit, terms []string, weight float64, keep int) []textindex.Hit {
	if len(hits) == 0 {
		return hits
	}
	top := textindex.Top(slices.Clone(hits), feedbackDocs)
	seen := make(map[string]bool, len(terms)+32)
	for _, t := range terms {
		seen[t] = true
	}
	var more []string
	for _, h := range top {
		for _, t := range textindex.Terms(c.entries[h.ID].text) {
			if !seen[t] {
				seen[t] = true
				more = append(more, t)
			}
		}
	}
	if len(more) == 0 {
		return hits
	}
	second := textindex.Top(c.words.Score(more), keep)
	if len(second) == 0 {
		return hits
	}
	best2 := second[0].Score
	scale := weight * top[0].Score / best2
	at := make(map[textindex.DocID]int, len(hits)+len(second))
	out := slices.Grow(slices.Clone(hits), len(second))
	for i, h := range out {
		at[h.ID] = i
	}
	for _, h := range second {
		if i, ok := at[h.ID]; ok {
			out[i].Score += scale * h.Score
			continue
		}
		out = append(out, textindex.Hit{ID: h.ID, Score: scale * h.Score})
	}
	return out
}
