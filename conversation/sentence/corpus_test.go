package sentence

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// boundary marks where a corpus text truly ends a piece.
const boundary = "¦"

// tokenStream cuts text as a streaming LLM server sends it: one delta per
// token of o200k_base (GPT-4o's vocabulary), holding back a token that
// ends inside a character until the character is complete, as servers do.
func tokenStream(t *testing.T, text string) []string {
	t.Helper()
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	var deltas []string
	pending := ""
	for _, id := range enc.Encode(text, nil, nil) {
		pending += enc.Decode([]int{id})
		if utf8.ValidString(pending) {
			deltas = append(deltas, pending)
			pending = ""
		}
	}
	if pending != "" {
		deltas = append(deltas, pending)
	}
	if strings.Join(deltas, "") != text {
		t.Fatal("the token stream does not rebuild the text")
	}
	return deltas
}

// cutEnds splits deltas and returns where each piece ends, moved past the
// whitespace and emoji that follow it (a cut before or after them is the
// same cut), and how many pieces were handed out by the push of the delta
// holding their last byte, rather than by a later one.
func cutEnds(opts Options, text string, deltas []string) (ends []int, prompt int) {
	s := New(opts)
	var pieces []Piece
	var handedBy []int // the delta whose push handed each piece out
	deltaEnd := make([]int, len(deltas))
	at := 0
	for i, d := range deltas {
		pieces = s.Push(pieces, d)
		at += len(d)
		deltaEnd[i] = at
		for len(handedBy) < len(pieces) {
			handedBy = append(handedBy, i)
		}
	}
	pieces = s.Flush(pieces)
	at = 0
	for i, p := range pieces[:max(len(pieces)-1, 0)] {
		at += len(p.Display)
		last := at - len(p.Display) + len(strings.TrimRightFunc(p.Display, func(r rune) bool { return isSpace(r) || isEmoji(r) })) - 1
		if i < len(handedBy) && last >= 0 && (handedBy[i] == 0 || deltaEnd[handedBy[i]-1] <= last) {
			prompt++
		}
		ends = append(ends, at+trailers([]byte(text[at:])))
	}
	return ends, prompt
}

// TestCorpusCuts splits LLM-style token streams of English, Chinese,
// Japanese and Korean replies (Markdown, numbers, URLs, abbreviations)
// with and without CutAtDeltaEnd and compares the cuts with the true ends
// marked in the texts: cutting at a delta's end may hand pieces out
// sooner, but it may not add a single wrong cut.
func TestCorpusCuts(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			marked := string(raw)
			text := strings.ReplaceAll(marked, boundary, "")
			var truth []int
			at := 0
			for _, part := range strings.Split(marked, boundary)[:strings.Count(marked, boundary)] {
				at += len(part)
				truth = append(truth, at+trailers([]byte(text[at:])))
			}
			truth = slices.Compact(truth)
			deltas := tokenStream(t, text)

			wrong := func(ends []int) []int {
				var w []int
				for _, e := range ends {
					if e < len(text) && !slices.Contains(truth, e) {
						w = append(w, e)
					}
				}
				return w
			}
			before, promptBefore := cutEnds(Options{}, text, deltas)
			after, promptAfter := cutEnds(Options{CutAtDeltaEnd: true}, text, deltas)
			wrongBefore, wrongAfter := wrong(before), wrong(after)
			missed := 0
			for _, e := range truth {
				if e < len(text) && !slices.Contains(after, e) {
					missed++
				}
			}
			t.Logf("%d deltas, %d true ends; without CutAtDeltaEnd %d cuts, %d wrong, %d handed out with their last token; "+
				"with it %d cuts, %d wrong, %d with their last token, %d true ends not cut",
				len(deltas), len(truth), len(before), len(wrongBefore), promptBefore, len(after), len(wrongAfter), promptAfter, missed)
			for _, e := range wrongBefore {
				t.Logf("wrong without CutAtDeltaEnd too: %q | %q", text[max(0, e-30):e], text[e:min(len(text), e+20)])
			}
			for _, e := range wrongAfter {
				if !slices.Contains(wrongBefore, e) {
					t.Errorf("a new wrong cut at byte %d: %q | %q", e, text[max(0, e-30):e], text[e:min(len(text), e+20)])
				}
			}
		})
	}
}
