package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDocumentsJSON(t *testing.T) {
	docs := []document{
		{Document: 7, Title: " A\n title\twith  spaces ", Metadata: documentMetadata{URL: "https://example.org/a?b=1&c=<2>"}, Contents: "short"},
		{Title: strings.Repeat("T", 300), Contents: strings.Repeat("é", 50)},
	}
	got := documentsJSON(docs, 20, 16000)
	want := `{"documents":[` +
		`{"document":1,"title":"A title with spaces","metadata":{"url":"https://example.org/a?b=1&c=<2>"},"contents":"short"},` +
		`{"document":2,"title":"` + strings.Repeat("T", maxTitleChars-1) + `…","metadata":{"url":""},"contents":"` + strings.Repeat("é", 19) + `…"}]}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if docs[0].Document != 7 || docs[0].Title != " A\n title\twith  spaces " {
		t.Error("documentsJSON changed its argument")
	}
	if got := documentsJSON(nil, 20, 16000); got != `{"documents":[]}` {
		t.Errorf("no documents: %s", got)
	}
}

// However tight the limit, the result is the documents JSON, the first
// documents kept: contents shrink to minDocumentChars, then the last
// documents go.
func TestDocumentsJSONFitsTheLimit(t *testing.T) {
	var docs []document
	for i := range 10 {
		docs = append(docs, document{
			Title:    fmt.Sprintf("Doc %d", i+1),
			Metadata: documentMetadata{URL: fmt.Sprintf("https://example.org/%d", i+1)},
			// Quotes and newlines grow when escaped.
			Contents: strings.Repeat("\"quoted\"\nline ", 300),
		})
	}
	for _, limit := range []int{200, 500, 1000, 3000, 10000, 16000, 100000} {
		got := documentsJSON(docs, DefaultMaxDocumentChars, limit)
		var d struct {
			Documents []document `json:"documents"`
		}
		if err := json.Unmarshal([]byte(got), &d); err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		n := utf8.RuneCountInString(got)
		if n > limit {
			t.Errorf("limit %d: %d characters", limit, n)
		}
		for i, doc := range d.Documents {
			if doc.Document != i+1 || doc.Title != fmt.Sprintf("Doc %d", i+1) {
				t.Errorf("limit %d: document %d is %+v", limit, i+1, doc)
			}
			if c := utf8.RuneCountInString(doc.Contents); len(d.Documents) < 10 && c != minDocumentChars {
				t.Errorf("limit %d: documents were dropped while document %d kept %d characters", limit, i+1, c)
			}
		}
		switch {
		case limit >= 100000 && len(d.Documents) != 10:
			t.Errorf("limit %d: %d documents", limit, len(d.Documents))
		case limit >= 3000 && len(d.Documents) != 10:
			t.Errorf("limit %d: %d documents, want all ten shortened", limit, len(d.Documents))
		case limit == 1000 && (len(d.Documents) == 0 || len(d.Documents) == 10):
			t.Errorf("limit %d: %d documents, want some", limit, len(d.Documents))
		}
	}
}

func TestIsSearch(t *testing.T) {
	for name, want := range map[string]bool{
		"search_wikipedia": true, "web_search": true,
		"get_weather": false, "read_file": false, "calculator": false, "get_current_datetime": false, "nope": false, "": false,
	} {
		if got := IsSearch(name); got != want {
			t.Errorf("IsSearch(%q) = %v", name, got)
		}
	}
}
