package conversation

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"koe/agent"
	"koe/protocol"
)

// citeMarker matches what models write to cite: [1], [2, 3], [1][4].
var citeMarker = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]`)
})

// citations maps the [n] of a reply to the documents its requests held,
// in the order first cited. Numbers that name no document are left out:
// a model may write [3] for a list item.
func citations(text string, docs map[int]agent.Document) []protocol.Citation {
	if len(docs) == 0 {
		return nil
	}
	var out []protocol.Citation
	seen := map[int]bool{}
	for _, m := range citeMarker().FindAllStringSubmatch(text, -1) {
		for _, part := range strings.Split(m[1], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(part))
			d, ok := docs[n]
			if err != nil || !ok || seen[n] {
				continue
			}
			seen[n] = true
			c := protocol.Citation{Document: n, Title: d.Title, Section: d.Heading, Page: d.Page}
			if strings.Contains(d.Source, "://") {
				c.URL = d.Source
			} else {
				c.File = d.Source
			}
			out = append(out, c)
		}
	}
	return out
}
