package conversation

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"koe/agent"
	"koe/knowledge"
)

// Knowledge is the characters' knowledge bases (package knowledge's
// Service), as turns read them and files are attached.
type Knowledge interface {
	Has(ctx context.Context, conf string) (bool, error)
	ReadFile(ctx context.Context, u knowledge.Upload, count func(string) int, room int) (knowledge.File, error)
	Read(ctx context.Context, q knowledge.Query) (knowledge.Result, error)
	Search(ctx context.Context, conf, text string, budget int) ([]knowledge.Passage, error)
}

// characterKnowledge is one character's knowledge base as its agent reads
// it.
type characterKnowledge struct {
	k    Knowledge
	conf string
}

func (c characterKnowledge) Read(ctx context.Context, q agent.KnowledgeQuery) (agent.KnowledgeResult, error) {
	res, err := c.k.Read(ctx, knowledge.Query{
		ConfUID: c.conf, Text: q.Text, InputBudget: q.InputBudget,
		Mode: knowledgeMode(q.Mode), OnSearch: q.OnSearch,
	})
	if err != nil {
		return agent.KnowledgeResult{}, err
	}
	return agent.KnowledgeResult{Documents: passageDocuments(res.Passages, 0), Whole: res.Whole,
		Searched: res.Searched, Match: res.Match, Titles: res.Titles}, nil
}

func knowledgeMode(m agent.KnowledgeMode) knowledge.Mode {
	switch m {
	case agent.KnowledgeAlways:
		return knowledge.Always
	case agent.KnowledgeWholeOnly:
		return knowledge.WholeOnly
	}
	return knowledge.Auto
}

// passageDocuments makes passages documents, numbered from first (0:
// left to the agent).
func passageDocuments(ps []knowledge.Passage, first int) []agent.Document {
	out := make([]agent.Document, len(ps))
	for i, p := range ps {
		out[i] = agent.Document{Title: p.Title, Source: p.Name, Heading: p.Heading, Page: p.Page, Contents: p.Text}
		if first > 0 {
			out[i].Number = first + i
		}
	}
	return out
}

// knowledgeOf is what a character's turns read of its knowledge base
// before answering (nil: koe runs without one, or the router is off and
// the model searches with the tool instead).
func (d *Deps) knowledgeOf(char Character) agent.Knowledge {
	if d.Knowledge == nil || d.KnowledgeRouter == knowledge.RouterOff {
		return nil
	}
	return characterKnowledge{k: d.Knowledge, conf: char.ConfUID}
}

// documentSearch is the search_documents tool: with the router off, the
// model searches the knowledge base when it decides to.
func (d *Deps) documentSearch(char Character) agent.Toolbox {
	if d.Knowledge == nil || d.KnowledgeRouter != knowledge.RouterOff {
		return nil
	}
	return &documentSearch{k: d.Knowledge, conf: char.ConfUID}
}

// searchDocumentsTool is the tool's name.
const searchDocumentsTool = "search_documents"

type documentSearch struct {
	k    Knowledge
	conf string
}

// Specs offers the tool only while the character has documents: a tool
// that can find nothing would only cost the model's attention. (The
// agent asks for the specs without a context.)
func (d *documentSearch) Specs() []agent.ToolSpec {
	if has, err := d.k.Has(context.TODO(), d.conf); err != nil || !has {
		return nil
	}
	return []agent.ToolSpec{{
		Name:        searchDocumentsTool,
		Description: "Search the documents you were given (manuals, rules, notes) for passages about a question. Use it when the answer may be in them. Results are numbered documents to cite like [1].",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look for, in a few words or a question"}},"required":["query"],"additionalProperties":false}`),
	}}
}

func (d *documentSearch) Call(ctx context.Context, c agent.ToolCall) (string, error) {
	if c.Name != searchDocumentsTool {
		return "", fmt.Errorf("there is no tool named %q", c.Name)
	}
	var args struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || strings.TrimSpace(args.Query) == "" {
		return "", fmt.Errorf(`give the query as {"query": "..."}`)
	}
	ps, err := d.k.Search(ctx, d.conf, args.Query, 0)
	if err != nil {
		return "", fmt.Errorf("the documents could not be searched")
	}
	if len(ps) == 0 {
		return fmt.Sprintf("Nothing in the documents matches %q.", args.Query), nil
	}
	return agent.DocumentsJSON(passageDocuments(ps, 1)), nil
}

func (d *documentSearch) IsSearch(name string) bool { return name == searchDocumentsTool }
