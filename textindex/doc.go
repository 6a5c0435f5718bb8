// Package textindex is koe's one keyword index, shared by long-term recall
// (a character's every past conversation turn) and the knowledge base
// (document chunks): an analyser that turns text into terms, an in-memory
// BM25 inverted index over those terms, and the two small rankers callers
// combine results with (Top, Fuse).
//
// Why BM25: recall and knowledge questions hinge on rare, exact words — a
// name, a place, a number, "pottery" — which embeddings blur and BM25 rewards
// through its inverse document frequency. It needs no model, no network and
// no training, scores 100k turns in well under a millisecond, saturates
// repeated words instead of rewarding a turn that says "dog" ten times, and
// normalises for length so a long monologue does not win every query. Its
// ranked lists fuse cleanly with other rankers (recency, vectors) through
// reciprocal-rank fusion, which needs ranks only, not comparable scores.
//
// Memory is the constraint the index is shaped by: one character may hold
// 100k turns and a server many characters. So postings are two parallel
// compact slices per term (doc ids and 16-bit term frequencies), term
// strings are interned once, document lengths sit in one slice indexed by
// DocID, and there is no forward index. Without one, Remove cannot know which
// posting lists hold the removed document; it marks the document dead and
// bumps an epoch, and each list recounts its live documents (its document
// frequency, needed for IDF) the first time a query meets it after a
// removal, caching the count for that epoch. Dead entries are dropped
// lazily under the write lock: from a list a query found mostly dead, and
// from every list once removed documents exceed a quarter of the index.
package textindex
