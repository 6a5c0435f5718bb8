package knowledge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"koe/agent"
)

// wordCount counts words: a tokenizer simple enough to reason about in
// the tests that check where cuts fall.
func wordCount(s string) int { return len(strings.Fields(s)) }

// tokens is koe's tokenizer, as the knowledge service passes it.
var tokens = agent.NewTokenizer("gpt-4o").Count

// checkPieces asserts what holds for every split: pieces within size,
// counted right, not empty, each a stretch of Body.
func checkPieces(t *testing.T, tx Text, pieces []Piece, count func(string) int, size int) {
	t.Helper()
	for i, p := range pieces {
		if strings.TrimSpace(p.Text) == "" || p.Text != strings.TrimSpace(p.Text) {
			t.Fatalf("piece %d is blank or untrimmed: %q", i, p.Text)
		}
		if p.Tokens != count(p.Text) || p.Tokens > size {
			t.Fatalf("piece %d: %d tokens (counted %d), size %d: %q", i, p.Tokens, count(p.Text), size, p.Text)
		}
		if !strings.Contains(tx.Body, p.Text) {
			t.Fatalf("piece %d is not a stretch of the body: %q", i, p.Text)
		}
	}
}

func TestSplitStoryByHeadings(t *testing.T) {
	tx, err := Extract(context.Background(), "story.md", "", readTestdata(t, "story.md"))
	if err != nil {
		t.Fatal(err)
	}
	pieces := Split(tx, tokens, 60, 8)
	checkPieces(t, tx, pieces, tokens, 60)
	// Each fact is in a piece headed by its own section.
	for text, heading := range map[string]string{
		"three islands joined by rope bridges":           "Setting",
		"The city has no horses":                         "Setting",
		"secretly afraid of deep water":                  "Ila Marrow",
		"brass hook he\nnamed Patience":                  "Captain Oren Vask",
		"Only salt mined under the full moon burns blue": "Rules of magic",
		"Oren's debt comes due":                          "Episode guide",
	} {
		found := false
		for _, p := range pieces {
			if strings.Contains(p.Text, text) {
				found = true
				if p.Heading != heading {
					t.Errorf("%q is under %q, want %q", text, p.Heading, heading)
				}
			}
		}
		if !found {
			t.Errorf("%q is in no piece", text)
		}
	}
	// A comment in a code fence is not a heading, and paragraphs that fit
	// are never cut.
	for _, p := range pieces {
		if p.Heading == "not a heading: a comment in a code fence" {
			t.Error("a fenced comment heads a piece")
		}
		if strings.Contains(p.Text, "Veyra sits") && !strings.Contains(p.Text, "seventh bell.") {
			t.Errorf("a paragraph that fits was cut: %q", p.Text)
		}
	}
	if pieces[0].Heading != "The Salt Lantern: Story Bible" || pieces[0].Page != 0 {
		t.Errorf("first piece %+v", pieces[0])
	}
}

func TestSplitHandbookPages(t *testing.T) {
	tx, err := Extract(context.Background(), "handbook.pdf", "", readTestdata(t, "handbook.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	pieces := Split(tx, tokens, 48, 8)
	checkPieces(t, tx, pieces, tokens, 48)
	for text, page := range map[string]int{
		"Lantern Works builds small lamps": 1,
		"Wear the amber goggles":           2,
		"Salaries are paid":                3,
		"farewell tea":                     4,
	} {
		for _, p := range pieces {
			if strings.HasPrefix(p.Text, text) && p.Page != page {
				t.Errorf("the piece starting %q is on page %d, want %d", text, p.Page, page)
			}
		}
	}
	if pieces[len(pieces)-1].Page != 4 {
		t.Errorf("the last piece is on page %d", pieces[len(pieces)-1].Page)
	}
	// PDFs have no "#" headings.
	for _, p := range pieces {
		if p.Heading != "" {
			t.Fatalf("heading %q", p.Heading)
		}
	}
}

// A paragraph over size is cut at sentences; overlap repeats whole
// sentences of the previous piece's end.
func TestSplitLongParagraph(t *testing.T) {
	var b strings.Builder
	for i := range 12 {
		fmt.Fprintf(&b, "Sentence number %d has six words. ", i)
	}
	tx := Text{Body: strings.TrimSpace(b.String()), Format: "text"}
	pieces := Split(tx, wordCount, 20, 6)
	checkPieces(t, tx, pieces, wordCount, 20)
	want := []string{
		"Sentence number 0 has six words. Sentence number 1 has six words. Sentence number 2 has six words.",
		"Sentence number 2 has six words. Sentence number 3 has six words. Sentence number 4 has six words.",
	}
	if pieces[0].Text != want[0] || pieces[1].Text != want[1] {
		t.Fatalf("got %+v", pieces[:2])
	}
	last := pieces[len(pieces)-1].Text
	if !strings.HasSuffix(last, "Sentence number 11 has six words.") {
		t.Fatalf("last %q", last)
	}
	// Without overlap, nothing repeats.
	pieces = Split(tx, wordCount, 20, 0)
	if len(pieces) != 4 || pieces[1].Text != "Sentence number 3 has six words. Sentence number 4 has six words. Sentence number 5 has six words." {
		t.Fatalf("got %+v", pieces)
	}
}

// A sentence over size is cut at words, a list at lines, a word over size
// between characters.
func TestSplitFinerCuts(t *testing.T) {
	long := strings.TrimSpace(strings.Repeat("word ", 25))
	tx := Text{Body: long, Format: "text"}
	pieces := Split(tx, wordCount, 10, 0)
	checkPieces(t, tx, pieces, wordCount, 10)
	if len(pieces) != 3 || wordCount(pieces[2].Text) != 5 {
		t.Fatalf("got %+v", pieces)
	}

	list := "- one two three\n- four five six\n- seven eight nine\n- ten eleven twelve"
	tx = Text{Body: list, Format: "markdown"}
	pieces = Split(tx, wordCount, 8, 0)
	checkPieces(t, tx, pieces, wordCount, 8)
	if len(pieces) != 2 || pieces[0].Text != "- one two three\n- four five six" {
		t.Fatalf("got %+v", pieces)
	}

	blob := strings.Repeat("QUJDRA", 400) // base64, no spaces
	tx = Text{Body: "Key: " + blob, Format: "text"}
	pieces = Split(tx, tokens, 50, 10)
	checkPieces(t, tx, pieces, tokens, 50)
	var joined strings.Builder
	for _, p := range pieces[1:] {
		joined.WriteString(p.Text)
	}
	if !strings.Contains("Key: "+joined.String(), blob) && !strings.Contains(joined.String(), blob[len(blob)-100:]) {
		t.Fatal("the blob's parts do not add up to it")
	}
}

func TestSplitCode(t *testing.T) {
	var b strings.Builder
	b.WriteString("# a comment, not a heading\n")
	for i := range 30 {
		fmt.Fprintf(&b, "def f%d(x):\n    return x + %d\n", i, i)
	}
	tx := Text{Body: b.String(), Format: "code"}
	pieces := Split(tx, tokens, 40, 10)
	checkPieces(t, tx, pieces, tokens, 40)
	for _, p := range pieces {
		if p.Heading != "" {
			t.Fatalf("code has heading %q", p.Heading)
		}
		// Cut at lines: every piece starts at the start of a line.
		if !strings.HasPrefix(p.Text, "def ") && !strings.HasPrefix(p.Text, "return ") && !strings.HasPrefix(p.Text, "#") {
			t.Fatalf("a piece starts mid-line: %q", p.Text)
		}
	}
}

func TestSplitEdges(t *testing.T) {
	if p := Split(Text{Body: ""}, tokens, 10, 2); len(p) != 0 {
		t.Fatalf("empty body: %+v", p)
	}
	if p := Split(Text{Body: " \n\n \n"}, tokens, 10, 2); len(p) != 0 {
		t.Fatalf("blank body: %+v", p)
	}
	// A size under 1 is 1, an overlap over half of size is half of it:
	// still every word, and an end.
	tx := Text{Body: "a b c d e", Format: "text"}
	pieces := Split(tx, wordCount, 0, 5)
	if len(pieces) != 5 || pieces[4].Text != "e" {
		t.Fatalf("got %+v", pieces)
	}
	// Only headings: they make a piece of their own.
	tx = Text{Body: "# A\n## B", Format: "markdown"}
	pieces = Split(tx, wordCount, 10, 2)
	if len(pieces) != 1 || pieces[0].Text != "# A\n## B" || pieces[0].Heading != "B" {
		t.Fatalf("got %+v", pieces)
	}
}

// TestSplitProperties splits generated documents of every format at
// many sizes: every word is in a piece, pieces keep the rules, the split
// is the same twice, and an overlap is at most overlap tokens of the
// previous piece's end.
func TestSplitProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 60 {
		format := []string{"text", "markdown", "html", "code", "pdf"}[round%5]
		tx := randomText(rng, format, 20+rng.IntN(200))
		count := wordCount
		if round%2 == 0 {
			count = tokens
		}
		size := 1 + rng.IntN(120)
		overlap := rng.IntN(size)
		pieces := Split(tx, count, size, overlap)
		checkPieces(t, tx, pieces, count, size)
		if again := Split(tx, count, size, overlap); !reflect.DeepEqual(pieces, again) {
			t.Fatal("two splits differ")
		}
		seen := map[string]bool{}
		for _, p := range pieces {
			for _, w := range strings.Fields(p.Text) {
				seen[w] = true
			}
		}
		for _, w := range strings.Fields(tx.Body) {
			if !seen[w] && count(w) <= size {
				t.Fatalf("round %d (%s, size %d): %q is in no piece", round, format, size, w)
			}
		}
		for i := 1; i < len(pieces); i++ {
			shared := sharedEdge(pieces[i-1].Text, pieces[i].Text)
			if shared != "" && count(shared) > min(overlap, size/2) && !strings.HasPrefix(shared, "#") {
				t.Fatalf("round %d: overlap %q is %d tokens, more than %d", round, shared, count(shared), overlap)
			}
		}
		for _, p := range pieces {
			if tx.Pages != nil && (p.Page < 1 || p.Page > len(tx.Pages)) {
				t.Fatalf("page %d of %d", p.Page, len(tx.Pages))
			}
		}
	}
}

// sharedEdge is the longest end of a that starts b (words are unique in
// the generated texts, so any such edge is the overlap).
func sharedEdge(a, b string) string {
	for i := 0; i < len(a); i++ {
		if strings.HasPrefix(b, a[i:]) && (i == 0 || a[i-1] == ' ' || a[i-1] == '\n') {
			return a[i:]
		}
	}
	return ""
}

// randomText makes a document of n unique words in paragraphs, with
// headings, lists and long sentences as format allows.
func randomText(rng *rand.Rand, format string, n int) Text {
	syllables := []string{"ka", "ri", "mo", "te", "su", "no", "ha", "yu", "ze", "lo"}
	var b strings.Builder
	var pages []int
	for i := range n {
		if format == "pdf" && (i == 0 || rng.IntN(40) == 0) {
			if i > 0 {
				b.WriteString("\n\n")
			}
			pages = append(pages, b.Len())
		}
		switch r := rng.IntN(30); {
		case r == 0 && (format == "markdown" || format == "html"):
			fmt.Fprintf(&b, "\n\n%s ", strings.Repeat("#", 1+rng.IntN(3)))
		case r == 1:
			b.WriteString("\n\n")
		case r == 2:
			b.WriteString("\n- ")
		case r < 6:
			b.WriteString(". ")
		case r == 6:
			b.WriteString("\n")
		default:
			b.WriteString(" ")
		}
		word := syllables[rng.IntN(len(syllables))] + syllables[rng.IntN(len(syllables))]
		fmt.Fprintf(&b, "%s%d", word, i)
	}
	body := b.String()
	return Text{Body: body, Format: format, Pages: pages}
}

// BenchmarkSplit measures chunking at koe's defaults with koe's tokenizer.
// Each round splits a document it has not seen: the tokenizer remembers
// recent counts, and a second split of the same text would measure that.
func BenchmarkSplit(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	docs := make([]Text, 64)
	for i := range docs {
		docs[i] = benchText(rng, 200<<10)
	}
	b.ResetTimer()
	pieces, bytes := 0, 0
	for i := range b.N {
		if i > 0 && i%len(docs) == 0 {
			b.StopTimer()
			for j := range docs {
				docs[j] = benchText(rng, 200<<10)
			}
			b.StartTimer()
		}
		tx := docs[i%len(docs)]
		pieces += len(Split(tx, tokens, 256, 32))
		bytes += len(tx.Body)
	}
	b.ReportMetric(float64(bytes)/(1<<20)/b.Elapsed().Seconds(), "MB/s")
	b.ReportMetric(float64(pieces)/b.Elapsed().Seconds(), "chunks/s")
}

// benchText is Markdown prose of about n bytes: sections of paragraphs of
// sentences of common words, in random order so no sentence repeats.
func benchText(rng *rand.Rand, n int) Text {
	words := strings.Fields("the a lamp of workshop staff handbook hours to and in safety is are we you pay light night " +
		"fog salt harbour bridge keeper captain rule chat moderator link emote ban warning day week month first last " +
		"every small reading room train solder goggles door fire drill quarter expense receipt travel notice badge tea")
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "## Section %d\n\n", rng.IntN(1000))
		for range 1 + rng.IntN(5) {
			for range 2 + rng.IntN(6) {
				for k := range 6 + rng.IntN(14) {
					if k > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(words[rng.IntN(len(words))])
				}
				b.WriteString(". ")
			}
			b.WriteString("\n\n")
		}
	}
	return Text{Body: b.String(), Format: "markdown"}
}

// A word longer than a piece is cut into the longest parts that fit,
// whatever the characters, and the search from the previous part's
// length finds the same cuts a search from nothing would.
func TestSplitLongWordsIntoLongestParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	alphabets := []string{"ab", "a", "日本語の", "éàü", "x1_", "😀a"}
	for round := range 40 {
		letters := []rune(alphabets[round%len(alphabets)])
		var b strings.Builder
		for range 200 + rng.IntN(3000) {
			b.WriteRune(letters[rng.IntN(len(letters))])
		}
		word := b.String()
		size := 1 + rng.IntN(60)
		s := &splitter{ctx: context.Background(), body: word, count: tokens, size: size}
		parts := s.runeParts(span{start: 0, end: len(word)})
		at := 0
		for i, p := range parts {
			if p.start != at || p.end <= p.start || p.tokens != tokens(word[p.start:p.end]) {
				t.Fatalf("round %d part %d: %+v at %d", round, i, p, at)
			}
			if p.end < len(word) {
				_, n := utf8.DecodeRuneInString(word[p.end:])
				if longer := tokens(word[p.start : p.end+n]); longer <= size && p.tokens <= size {
					t.Fatalf("round %d part %d of %d tokens could take one more character (%d tokens, size %d)", round, i, p.tokens, longer, size)
				}
			}
			at = p.end
		}
		if at != len(word) {
			t.Fatalf("round %d: the parts end at %d of %d", round, at, len(word))
		}
	}
}

// A split whose context ends stops with its error.
func TestSplitStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	body := strings.Repeat("word ", 10000) + strings.Repeat("x", 100000)
	if pieces, err := split(ctx, Text{Body: body, Format: "text"}, tokens, 64, 8); err != context.Canceled || pieces != nil {
		t.Fatalf("got %d pieces, %v", len(pieces), err)
	}
}
