package knowledge

import "koe/textindex"

// keywordParams is how the memory and local stores rank chunks by
// keywords. Questions to a manual name things in the reader's words and
// the manual in its own ("sizes" asked, "bytes" written), so the query is
// widened with textindex's related terms, at half a query word's weight:
// a passage in the reader's words still ranks first. On the two question
// sets (knowledge/testdata/manual, tuned on; knowledge/testdata/heldout,
// not) see docs/memory.md for what it changes.
var keywordParams = textindex.Params{Related: 0.5}
