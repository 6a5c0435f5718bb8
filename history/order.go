package history

import (
	"slices"
	"sort"

	"koe"
)

// The orders listings come in, whatever order a backend reads them in.

// SortHistories orders a listing most recently active first; of two
// histories active in the same second, the larger uid comes first.
func SortHistories(list []koe.ListedHistory) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].Timestamp != list[j].Timestamp {
			return list[i].Timestamp > list[j].Timestamp
		}
		return list[i].UID > list[j].UID
	})
}

// SortDocs orders documents oldest first. It is stable: documents added
// in the same instant keep the order they were read in (by id).
func SortDocs(docs []koe.KnowledgeDoc) {
	slices.SortStableFunc(docs, func(a, b koe.KnowledgeDoc) int { return a.Added.Compare(b.Added) })
}
