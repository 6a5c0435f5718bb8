package live

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"koe/recall"
)

// Recaller is the characters' long-term memory (recall's Service).
type Recaller interface {
	Recall(ctx context.Context, q recall.Query) (recall.Block, error)
}

// viewerNotes is the live chat's per-viewer memory: the lines of earlier
// chat in which the viewer spoke, as the character's long-term recall
// ranks them for the viewer's name.
type viewerNotes struct {
	recall Recaller
	conf   string
	budget int
}

func (v viewerNotes) About(ctx context.Context, viewer string) (string, error) {
	b, err := v.recall.Recall(ctx, recall.Query{ConfUID: v.conf, Text: viewer, Budget: v.budget})
	if err != nil {
		return "", fmt.Errorf("recall about viewer %s: %w", viewer, err)
	}
	var said []string
	for _, mem := range b.Memories {
		for _, line := range strings.Split(mem.Text, "\n") {
			if mentions(line, viewer) {
				said = append(said, strings.TrimSpace(line))
			}
		}
	}
	return strings.Join(said, " / "), nil
}

// mentions reports whether line names viewer as a whole word, ignoring
// case.
func mentions(line, viewer string) bool {
	if viewer == "" {
		return false
	}
	l, v := strings.ToLower(line), strings.ToLower(viewer)
	for i := 0; ; {
		j := strings.Index(l[i:], v)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(v)
		prev, _ := utf8.DecodeLastRuneInString(l[:start])
		next, _ := utf8.DecodeRuneInString(l[end:])
		before := start == 0 || !isWordRune(prev)
		after := end == len(l) || !isWordRune(next)
		if before && after {
			return true
		}
		i = start + 1
	}
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }
