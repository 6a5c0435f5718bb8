package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// DefaultMaxDocumentChars bounds the contents of one document of a search
// result unless tools.max_document_chars says otherwise.
const DefaultMaxDocumentChars = 3000

// minDocumentChars is the least contents a document keeps when a result
// must shrink to fit tools.max_result_chars; below it a document is
// dropped instead.
const minDocumentChars = 100

// maxTitleChars bounds a document's title: titles are names, not text.
const maxTitleChars = 200

// document is one search hit as the model reads it, in the documents JSON
// of the design: {"documents":[{"document":1,"title","metadata","contents"}]},
// numbered so that the model can cite it as [1].
type document struct {
	Document int              `json:"document"`
	Title    string           `json:"title"`
	Metadata documentMetadata `json:"metadata"`
	Contents string           `json:"contents"`
}

type documentMetadata struct {
	URL string `json:"url"`
}

// documentsJSON writes docs as the documents JSON, numbered from 1. Each
// document's contents is cut to maxChars characters, and the whole fits
// limit characters: contents shrink evenly, then the last documents go,
// so that the result stays valid JSON rather than being cut by the box.
func documentsJSON(docs []document, maxChars, limit int) string {
	docs = append([]document(nil), docs...)
	for i := range docs {
		docs[i].Document = i + 1
		docs[i].Title = clipTo(oneLine(docs[i].Title), maxTitleChars)
	}
	per := maxChars
	for {
		out := encodeDocuments(docs, per)
		n := utf8.RuneCountInString(out)
		if n <= limit || len(docs) == 0 {
			return out
		}
		// Shrink every document by its share of the excess, a little
		// more than needed since escapes make the count inexact.
		shrunk := per - (n-limit)/len(docs) - 20
		if shrunk >= minDocumentChars {
			per = shrunk
			continue
		}
		if per > minDocumentChars {
			per = minDocumentChars
			continue
		}
		docs = docs[:len(docs)-1]
	}
}

func encodeDocuments(docs []document, maxChars int) string {
	cut := make([]document, len(docs))
	for i, d := range docs {
		d.Contents = clipTo(d.Contents, maxChars)
		cut[i] = d
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The model reads this: "<" is clearer than "\u003c".
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Documents []document `json:"documents"`
	}{cut}); err != nil {
		// Strings and ints always encode.
		panic(fmt.Sprintf("tools: documents do not encode: %v", err))
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// noResults is the result of a search that found nothing: a sentence,
// since an empty list gives the model nothing to say.
func noResults(query string) string {
	return fmt.Sprintf("No results were found for %q.", clip(query))
}

// oneLine joins the lines and runs of spaces of s into single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
