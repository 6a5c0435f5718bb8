package recall

import "koe/textindex"

// spreadLocked lowers each candidate's score by spread for every better
// candidate of its session, and returns the best limit of them. A session
// that matches well fills a block with its small talk, while a question
// about several occasions needs a little of each (Ranking.Spread). Only
// the best 2·limit candidates are looked at: a candidate further down
// would not reach the block even if it were the first of its session.
// Called with c.mu read-locked.
func (c *character) spreadLocked(cand []textindex.Hit, spread float64, limit int) []textindex.Hit {
	cand = textindex.Top(cand, 2*limit)
	factor := map[int]float64{}
	for i := range cand {
		s := c.entries[cand[i].ID].session
		f, ok := factor[s]
		if !ok {
			f = 1
		}
		cand[i].Score *= f
		factor[s] = f * spread
	}
	return textindex.Top(cand, limit)
}
