package histories

import (
	"strings"
	"unicode/utf8"
)

// titleRunes bounds a history's title: a list entry, read at a glance.
const titleRunes = 48

// Title is what a list calls a history: the first words of its opening
// (koe.ListedHistory.Opening), whitespace folded, cut after a whole word
// with "…" when it goes on. A first word longer than the bound is cut
// inside. "" when the history has no opening.
func Title(opening string) string {
	words := strings.Fields(opening)
	var b strings.Builder
	n := 0
	for i, w := range words {
		wn := utf8.RuneCountInString(w)
		if i > 0 {
			wn++
		}
		if n+wn > titleRunes {
			if i == 0 {
				b.WriteString(string([]rune(w)[:titleRunes]))
			}
			b.WriteString("…")
			return b.String()
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		n += wn
	}
	return b.String()
}
