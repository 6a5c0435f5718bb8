package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Document is one numbered text of a request that the model may cite as
// [Number]: a file attached to the conversation, a document of the
// character's knowledge base or a passage retrieved from it.
type Document struct {
	Number  int
	Title   string
	Source  string // the file's name, or a URL
	Heading string // the section a passage comes from
	Page    int    // the page a passage starts on (0: none)
	// Contents is the text the model reads; a citations frame leaves it
	// out.
	Contents string
}

// File is a file attached to a conversation at one point of it: it rides
// with the user message that follows, numbered within its history.
type File struct {
	Number int
	Name   string
	Title  string
	Text   string
	Tokens int
}

// document is the file as the model reads it.
func (f File) document() Document {
	return Document{Number: f.Number, Title: f.Title, Source: f.Name, Contents: f.Text}
}

// wireDocument is one document of the design's documents JSON.
type wireDocument struct {
	Document int               `json:"document"`
	Title    string            `json:"title"`
	Metadata map[string]string `json:"metadata"`
	Contents string            `json:"contents"`
}

// DocumentsJSON writes docs as the documents JSON the model reads:
// {"documents":[{"document":1,"title":…,"metadata":{…},"contents":…}]}.
func DocumentsJSON(docs []Document) string {
	out := struct {
		Documents []wireDocument `json:"documents"`
	}{make([]wireDocument, len(docs))}
	for i, d := range docs {
		meta := map[string]string{}
		if d.Source != "" {
			if strings.Contains(d.Source, "://") {
				meta["url"] = d.Source
			} else {
				meta["file"] = d.Source
			}
		}
		if d.Heading != "" {
			meta["section"] = d.Heading
		}
		if d.Page > 0 {
			meta["page"] = fmt.Sprint(d.Page)
		}
		title := d.Title
		if title == "" {
			title = d.Source
		}
		out.Documents[i] = wireDocument{Document: d.Number, Title: title, Metadata: meta, Contents: d.Contents}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The model reads this: "<" is clearer than "\u003c".
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		// Strings and ints always encode.
		panic(fmt.Sprintf("agent: documents do not encode: %v", err))
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// ParseDocuments reads the documents JSON back (a search tool's result),
// without the contents; ok is false when text is not documents JSON.
func ParseDocuments(text string) (docs []Document, ok bool) {
	if !strings.HasPrefix(strings.TrimSpace(text), `{"documents"`) {
		return nil, false
	}
	var in struct {
		Documents []wireDocument `json:"documents"`
	}
	if err := json.Unmarshal([]byte(text), &in); err != nil {
		return nil, false
	}
	for _, d := range in.Documents {
		src := d.Metadata["url"]
		if src == "" {
			src = d.Metadata["file"]
		}
		doc := Document{Number: d.Document, Title: d.Title, Source: src, Heading: d.Metadata["section"]}
		fmt.Sscan(d.Metadata["page"], &doc.Page)
		docs = append(docs, doc)
	}
	return docs, true
}

// Knowledge is a character's knowledge base as a turn reads it: package
// knowledge, reached through conversation, which knows the character.
type Knowledge interface {
	// Read returns what the turn should read for its message. Its
	// failure never fails a turn: the reply goes on without documents.
	Read(ctx context.Context, q KnowledgeQuery) (KnowledgeResult, error)
}

// KnowledgeMode says when a turn reads retrieved passages.
type KnowledgeMode int

// The modes, as knowledge.Mode has them.
const (
	KnowledgeAuto      KnowledgeMode = iota // when the best passage matches the question well enough
	KnowledgeAlways                         // the best passages, however weak
	KnowledgeWholeOnly                      // only a knowledge base small enough to read whole
)

// KnowledgeQuery is what a turn asks.
type KnowledgeQuery struct {
	Text string
	// InputBudget is the model's input budget in tokens.
	InputBudget int
	Mode        KnowledgeMode
	// OnSearch, if set, is called just before the index is searched (a
	// knowledge base too large to read whole), from Read's goroutine.
	OnSearch func()
}

// KnowledgeResult is what the turn reads: documents without numbers (the
// agent numbers them), and how they were found.
type KnowledgeResult struct {
	Documents []Document
	Whole     bool
	Searched  bool
	Match     float64
	// Titles name the knowledge base's documents, for the LLM router.
	Titles []string
}

// Routes of the LLM router.
const (
	RouteRAG   = "rag"
	RouteAgent = "agent"
)

// The router's request: one structured answer at temperature 0.
const routerInstructions = `You route a user's message for an assistant that has a knowledge base of documents. Answer "rag" when answering needs facts from those documents, "agent" when it does not (small talk, opinions, questions about the conversation itself, general knowledge).
The knowledge base holds: %s.
Answer with JSON only: {"route":"rag" or "agent","reason":"a few words"}.`

// RouteSchema is the JSON schema of the router's answer.
var RouteSchema = json.RawMessage(`{"type":"object","properties":{"route":{"type":"string","enum":["rag","agent"]},"reason":{"type":"string"}},"required":["route","reason"],"additionalProperties":false}`)

// errBadRoute is a router answer that is not one of the routes.
var errBadRoute = errors.New("the router's answer is not {\"route\":\"rag\"|\"agent\"}")

// route asks the LLM whether text needs the knowledge base: one
// structured-output call at temperature 0. A failure routes to the agent
// (no retrieval), never fails the turn.
func (a *Agent) route(ctx context.Context, text string, titles []string) (route, reason string, err error) {
	zero := float32(0)
	req := Request{
		Messages: []WireMessage{
			{Role: RoleSystem, Content: fmt.Sprintf(routerInstructions, strings.Join(quoteAll(titles), ", "))},
			{Role: RoleUser, Content: text},
		},
		Temperature: &zero,
		JSONSchema:  &JSONSchema{Name: "route", Schema: RouteSchema},
	}
	out, _, err := a.opts.LLM.Complete(ctx, req)
	if err != nil {
		return RouteAgent, "", err
	}
	var ans struct {
		Route  string `json:"route"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(jsonObject(out)), &ans); err != nil {
		return RouteAgent, "", fmt.Errorf("%w: %v", errBadRoute, err)
	}
	switch ans.Route {
	case RouteRAG, RouteAgent:
		return ans.Route, ans.Reason, nil
	}
	return RouteAgent, "", errBadRoute
}

// jsonObject is the outermost {...} of s: some servers wrap structured
// output in a code fence or a sentence despite being asked not to.
func jsonObject(s string) string {
	i, j := strings.IndexByte(s, '{'), strings.LastIndexByte(s, '}')
	if i < 0 || j < i {
		return s
	}
	return s[i : j+1]
}

// maxRouterTitles bounds the titles the router reads: a list, not the
// knowledge base.
const maxRouterTitles = 30

func quoteAll(titles []string) []string {
	out := make([]string, 0, min(len(titles), maxRouterTitles)+1)
	for i, t := range titles {
		if i == maxRouterTitles {
			out = append(out, fmt.Sprintf("and %d more", len(titles)-maxRouterTitles))
			break
		}
		out = append(out, fmt.Sprintf("%q", t))
	}
	return out
}
