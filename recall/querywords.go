package recall

import (
	"strings"

	"koe/textindex"
)

// questionFrames are words that frame a question about the past rather
// than name its subject: "What kind of books would Ana likely enjoy?"
// is about books and Ana. The index keeps them (a message may be about a
// kind of thing), so they are dropped from the query only, here, rather
// than in textindex's stop words, which the knowledge base shares.
var questionFrames = map[string]bool{
	"likely": true, "unlikely": true, "probably": true, "possibly": true, "might": true,
	"think": true, "thinks": true, "believe": true, "consider": true, "considered": true,
	"kind": true, "kinds": true, "type": true, "types": true, "sort": true, "sorts": true,
	"based": true, "according": true, "mention": true, "mentioned": true, "mentions": true,
	"say": true, "said": true, "tell": true, "told": true, "ever": true, "thing": true,
	"things": true, "something": true, "anything": true, "specific": true, "particular": true,
	"remember": true, "recall": true, "many": true, "much": true, "often": true,
}

// queryTerms analyses a query (whose lowercased words are words) for the
// keyword index, without the words that only frame it when rk says so.
func queryTerms(q string, words []string, rk Ranking) []string {
	if !rk.QueryStops {
		return textindex.Terms(q)
	}
	kept := make([]string, 0, len(words))
	for _, w := range words {
		if !questionFrames[w] {
			kept = append(kept, w)
		}
	}
	// Words splits as Terms does, so analysing the kept words joined is
	// analysing the question without the others.
	return textindex.Terms(strings.Join(kept, " "))
}
