package postgres

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"koe/knowledge"
)

// The chunk that ranks first by keywords is marked for the auto router
// and kept among the hits, even when reciprocal-rank fusion would leave
// it out: here six chunks that hold one of the question's words and lie
// near its vector are in both rankings, and outrank the one chunk that
// holds all of its words but lies far from its vector (as a weak
// embedding model may put it).
func TestIndexKeepsKeywordBest(t *testing.T) {
	p := openTestIndex(t)
	conf := testConf(t, p)
	const dims = 64
	query := "which telescope does the observatory use, and when was it bought?"
	qvec := axis(dims, 0, 1, 0.1)
	answer := chunk(0, "The main instrument", "The observatory uses a reflecting telescope, bought in 1998.")
	answer.Vector = axis(dims, 60, 61, 0)
	chunks := []knowledge.Chunk{answer}
	for i := range 6 {
		c := chunk(1+i, "Visiting", fmt.Sprintf("The observatory opens on night %d of the week.", i))
		c.Vector = axis(dims, 0, 1, 0.2+float32(i)/10)
		chunks = append(chunks, c)
	}
	pgPut(t, p, conf, "handbook", chunks...)

	keyword := pgSearch(t, p, conf, knowledge.SearchQuery{Text: query, Limit: 3})
	if len(keyword) == 0 || keyword[0].Seq != 0 || !keyword[0].KeywordBest {
		t.Fatalf("keyword hits %v: the answer is not first and marked", hitKeys(keyword))
	}
	hybrid := pgSearch(t, p, conf, knowledge.SearchQuery{Text: query, Vector: qvec, Limit: 3})
	at := slices.IndexFunc(hybrid, func(h knowledge.Hit) bool { return h.Seq == 0 })
	if at < 0 || !hybrid[at].KeywordBest {
		t.Fatalf("hybrid hits %v: the keyword ranking's first is missing or unmarked", hitKeys(hybrid))
	}
	marked := 0
	for _, h := range hybrid {
		if h.KeywordBest {
			marked++
		}
	}
	if marked != 1 || len(hybrid) != 3 {
		t.Fatalf("hybrid hits %v: %d marked, want 1 of 3", strings.Join(hitKeys(hybrid), " "), marked)
	}
}
