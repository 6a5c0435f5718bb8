package recall

// coverageLocked scores each session that holds a query term by the sum,
// over the distinct terms, of the term's best score in one of its
// messages, and returns the scores with the best of them
// (Ranking.Coverage). Scoring the terms one at a time walks the same
// postings as scoring them together. Called with c.mu read-locked.
func (c *character) coverageLocked(terms []string) (map[int]float64, float64) {
	sess := map[int]float64{}
	times := make(map[string]int, len(terms))
	for _, t := range terms {
		times[t]++
	}
	one := make([]string, 0, 4)
	bestOf := map[int]float64{}
	for t, n := range times {
		one = one[:0]
		for range n {
			one = append(one, t)
		}
		clear(bestOf)
		for _, h := range c.words.Score(one) {
			s := c.entries[h.ID].session
			bestOf[s] = max(bestOf[s], h.Score)
		}
		for s, v := range bestOf {
			sess[s] += v
		}
	}
	best := 0.0
	for _, v := range sess {
		best = max(best, v)
	}
	return sess, best
}
