package knowledge

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// manualQuestion is one entry of testdata/manual/questions.json, the
// question set the retrieval evaluation scores: a question is answered
// when a chunk in the context contains its evidence.
type manualQuestion struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	File     string `json:"file"`
	Evidence string `json:"evidence"`
}

func loadManualQuestions(t testing.TB) []manualQuestion {
	t.Helper()
	return loadQuestions(t, "manual")
}

// loadQuestions reads testdata/dir/questions.json.
func loadQuestions(t testing.TB, dir string) []manualQuestion {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", dir, "questions.json"))
	if err != nil {
		t.Fatalf("read questions: %v", err)
	}
	var set struct {
		Questions []manualQuestion `json:"questions"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&set); err != nil {
		t.Fatalf("decode questions: %v", err)
	}
	return set.Questions
}

// TestManualQuestionsEvidence keeps the question set honest: every evidence
// phrase must be text a reader sees on its page, inside one block (a
// paragraph, list item, table cell, heading), so that any extractor that
// keeps blocks apart leaves it whole in the text a chunk is cut from. It
// must also survive an extractor that puts a space at every inline tag
// ("<b>x</b>y" read as "x y"), so the phrase never depends on how words
// glued to markup are joined.
func TestManualQuestionsEvidence(t *testing.T) {
	questions := loadManualQuestions(t)
	if len(questions) < 40 {
		t.Errorf("%d questions; the evaluation needs at least 40", len(questions))
	}
	blocksByFile := map[string]manualBlocks{}
	seenID := map[string]bool{}
	for i, q := range questions {
		if q.ID == "" || strings.TrimSpace(q.Question) == "" || q.File == "" {
			t.Errorf("question %d: id, question and file are all required: %+v", i, q)
			continue
		}
		if seenID[q.ID] {
			t.Errorf("%s: duplicate id", q.ID)
		}
		seenID[q.ID] = true

		evidence := normalizeSpace(q.Evidence)
		if evidence != q.Evidence {
			t.Errorf("%s: evidence %q is not whitespace-normalised", q.ID, q.Evidence)
		}
		if n := len(strings.Fields(evidence)); n < 5 || n > 15 {
			t.Errorf("%s: evidence has %d words, want 5-15", q.ID, n)
		}

		if strings.Contains(strings.ToLower(q.Question), strings.ToLower(evidence)) {
			t.Errorf("%s: the question quotes its evidence; paraphrase it", q.ID)
		}

		blocks, ok := blocksByFile[q.File]
		if !ok {
			var err error
			if blocks, err = readManualBlocks(q.File); err != nil {
				t.Errorf("%s: %v", q.ID, err)
				continue
			}
			blocksByFile[q.File] = blocks
		}
		if !blocks.joined.contains(evidence) {
			t.Errorf("%s: evidence %q is not in one block of %s's visible text", q.ID, evidence, q.File)
		} else if !blocks.spaced.contains(evidence) {
			t.Errorf("%s: evidence %q straddles an inline tag in %s", q.ID, evidence, q.File)
		}
	}
}

// manualBlocks is a page's visible text, one string per block element,
// read twice: inline tags joined as a browser shows them, and with a
// space at every inline tag.
type manualBlocks struct {
	joined, spaced blockTexts
}

type blockTexts []string

func (b blockTexts) contains(phrase string) bool {
	for _, text := range b {
		if strings.Contains(text, phrase) {
			return true
		}
	}
	return false
}

func readManualBlocks(name string) (manualBlocks, error) {
	f, err := os.Open(filepath.Join("testdata", "manual", filepath.Base(name)))
	if err != nil {
		return manualBlocks{}, fmt.Errorf("open manual page: %w", err)
	}
	defer f.Close()
	doc, err := html.Parse(f)
	if err != nil {
		return manualBlocks{}, fmt.Errorf("parse %s: %w", name, err)
	}
	var out manualBlocks
	var joined, spaced strings.Builder
	flush := func() {
		if s := normalizeSpace(joined.String()); s != "" {
			out.joined = append(out.joined, s)
		}
		if s := normalizeSpace(spaced.String()); s != "" {
			out.spaced = append(out.spaced, s)
		}
		joined.Reset()
		spaced.Reset()
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			joined.WriteString(n.Data)
			spaced.WriteString(n.Data)
			return
		case html.ElementNode:
			if invisibleElement[n.DataAtom] {
				return
			}
		case html.CommentNode, html.DoctypeNode:
			return
		}
		block := n.Type == html.ElementNode && blockElement[n.DataAtom]
		if block {
			flush()
		} else {
			spaced.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if block {
			flush()
		} else {
			spaced.WriteByte(' ')
		}
	}
	walk(doc)
	flush()
	if len(out.joined) == 0 {
		return manualBlocks{}, fmt.Errorf("%s: no visible text", name)
	}
	return out, nil
}

func normalizeSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

var invisibleElement = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true,
	atom.Noscript: true, atom.Template: true,
}

var blockElement = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true,
	atom.Body: true, atom.Br: true, atom.Caption: true, atom.Dd: true, atom.Details: true,
	atom.Div: true, atom.Dl: true, atom.Dt: true, atom.Fieldset: true, atom.Figcaption: true,
	atom.Figure: true, atom.Footer: true, atom.Form: true, atom.H1: true, atom.H2: true,
	atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true, atom.Header: true,
	atom.Hr: true, atom.Li: true, atom.Main: true, atom.Nav: true, atom.Ol: true,
	atom.P: true, atom.Pre: true, atom.Section: true, atom.Summary: true, atom.Table: true,
	atom.Tbody: true, atom.Td: true, atom.Tfoot: true, atom.Th: true, atom.Thead: true,
	atom.Tr: true, atom.Ul: true, atom.Html: true,
}
