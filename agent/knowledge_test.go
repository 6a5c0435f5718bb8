package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"koe/agent"
	"koe/testkit/fakellm"
)

// fakeKnowledge answers a turn with fixed documents and records what it
// was asked.
type fakeKnowledge struct {
	mu     sync.Mutex
	asked  []agent.KnowledgeQuery
	answer func(agent.KnowledgeQuery) (agent.KnowledgeResult, error)
}

func (k *fakeKnowledge) Read(ctx context.Context, q agent.KnowledgeQuery) (agent.KnowledgeResult, error) {
	k.mu.Lock()
	k.asked = append(k.asked, q)
	k.mu.Unlock()
	if q.OnSearch != nil && q.Mode != agent.KnowledgeWholeOnly {
		q.OnSearch()
	}
	return k.answer(q)
}

func (k *fakeKnowledge) modes() []agent.KnowledgeMode {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []agent.KnowledgeMode
	for _, q := range k.asked {
		out = append(out, q.Mode)
	}
	return out
}

var rulesPassage = agent.Document{Title: "Channel rules", Source: "rules.html", Heading: "Spam", Page: 0,
	Contents: "Links are allowed only from moderators."}

// statusEvents records the documents and statuses a turn reports.
type statusEvents struct {
	tokens
	mu       sync.Mutex
	statuses []string
	docs     []agent.Document
}

func (e *statusEvents) Status(task, state, text, details string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.statuses = append(e.statuses, task+" "+state+": "+text)
}

func (e *statusEvents) Documents(docs []agent.Document) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.docs = append(e.docs, docs...)
}

// documentsOf decodes the documents JSON inside a message.
func documentsOf(t *testing.T, content string) []map[string]any {
	t.Helper()
	i := strings.Index(content, `{"documents"`)
	if i < 0 {
		t.Fatalf("no documents JSON in %q", content)
	}
	var out struct {
		Documents []map[string]any `json:"documents"`
	}
	dec := json.NewDecoder(strings.NewReader(content[i:]))
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("documents JSON does not decode: %v\n%s", err, content)
	}
	return out.Documents
}

// A file attached before a message rides with it as numbered documents
// JSON, ahead of the text; the knowledge base's passages come after the
// earlier turns and above the persona, numbered after the files; the
// system prompt asks for citations and the request ends with the
// citation reminder. The emitter hears every document number.
func TestDocumentsInTheContext(t *testing.T) {
	k := &fakeKnowledge{answer: func(q agent.KnowledgeQuery) (agent.KnowledgeResult, error) {
		if !strings.Contains(q.Text, "links") {
			return agent.KnowledgeResult{Searched: true}, nil
		}
		return agent.KnowledgeResult{Documents: []agent.Document{rulesPassage}, Searched: true, Match: 1}, nil
	}}
	a, s := newAgentWith(t, func(o *agent.Options) { o.Knowledge = k }, fakellm.Reply{Tokens: []string{"Hi."}}, fakellm.Reply{Tokens: []string{"Only mods may post links [2]."}})
	a.AddUser("hello")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatal(err)
	}
	a.AddAssistant("Hi.", false)
	a.AttachFile(agent.File{Number: 1, Name: "notes.md", Title: "Stream notes", Text: "We stream on Fridays.", Tokens: 6})
	a.AddUser("can I post links?")
	ev := &statusEvents{}
	if err := a.Reply(testCtx(t), ev); err != nil {
		t.Fatal(err)
	}
	req := s.Requests()[1]
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	if last.Role != "user" {
		t.Fatalf("last message is %s", last.Role)
	}
	// alternate joins the documents, the persona, the message and the
	// reminder into one user message: check their order inside it.
	body := last.Content
	order := []string{`"document":2`, persona, `{"documents":[{"document":1,"title":"Stream notes"`, "can I post links?", "Cite the documents you used"}
	at := -1
	for _, want := range order {
		i := strings.Index(body, want)
		if i < 0 || i < at {
			t.Fatalf("%q missing or out of order in the last user message:\n%s", want, body)
		}
		at = i
	}
	docs := documentsOf(t, body)
	meta := docs[0]["metadata"].(map[string]any)
	if docs[0]["title"] != "Channel rules" || meta["file"] != "rules.html" || meta["section"] != "Spam" || docs[0]["contents"] != rulesPassage.Contents {
		t.Errorf("knowledge document = %v", docs[0])
	}
	if !strings.Contains(msgs[0].Content, "the documents in this conversation are numbered") {
		t.Errorf("system prompt lacks the citation section:\n%s", msgs[0].Content)
	}
	if !strings.Contains(s.Requests()[0].Messages[0].Content, "Current date") || strings.Contains(s.Requests()[0].Messages[0].Content, "Citations:") {
		t.Errorf("a turn without documents asks for citations")
	}
	if len(ev.docs) != 2 || ev.docs[0].Number != 1 || ev.docs[0].Source != "notes.md" || ev.docs[1].Number != 2 || ev.docs[1].Source != "rules.html" || ev.docs[1].Contents != "" {
		t.Errorf("documents told = %+v", ev.docs)
	}
	if got := strings.Join(ev.statuses, "|"); got != "knowledge start: Searching the documents|knowledge end: Found 1 passage in rules.html" {
		t.Errorf("statuses = %s", got)
	}
	if rep := a.LastContext(); rep.DocumentTokens == 0 {
		t.Error("the report does not count the documents")
	}
}

// The llm router asks the model once, at temperature 0 with the route
// schema, before answering: "rag" reads the passages, "agent" does not,
// and a failed or nonsense route answers without documents. A knowledge
// base small enough to read whole is read without asking.
func TestLLMRouter(t *testing.T) {
	cases := []struct {
		name      string
		route     fakellm.Reply
		whole     bool
		wantDocs  bool
		wantModes []agent.KnowledgeMode
		calls     int
	}{
		{"rag", fakellm.Reply{Tokens: []string{`{"route":"rag","reason":"asks about the rules"}`}}, false, true, []agent.KnowledgeMode{agent.KnowledgeWholeOnly, agent.KnowledgeAlways}, 2},
		{"agent", fakellm.Reply{Tokens: []string{`{"route":"agent","reason":"small talk"}`}}, false, false, []agent.KnowledgeMode{agent.KnowledgeWholeOnly}, 2},
		{"fails", fakellm.Reply{Status: 500}, false, false, []agent.KnowledgeMode{agent.KnowledgeWholeOnly}, 2},
		{"nonsense", fakellm.Reply{Tokens: []string{`I think rag`}}, false, false, []agent.KnowledgeMode{agent.KnowledgeWholeOnly}, 2},
		{"whole", fakellm.Reply{}, true, true, []agent.KnowledgeMode{agent.KnowledgeWholeOnly}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := &fakeKnowledge{answer: func(q agent.KnowledgeQuery) (agent.KnowledgeResult, error) {
				res := agent.KnowledgeResult{Titles: []string{"Channel rules"}}
				if c.whole || q.Mode == agent.KnowledgeAlways {
					res.Documents, res.Whole, res.Searched = []agent.Document{rulesPassage}, c.whole, !c.whole
				}
				return res, nil
			}}
			replies := []fakellm.Reply{c.route, {Tokens: []string{"Answer."}}}
			if c.whole {
				replies = replies[1:]
			}
			a, s := newAgentWith(t, func(o *agent.Options) { o.Knowledge, o.Router = k, agent.RouterLLM }, replies...)
			a.AddUser("can I post links?")
			if err := a.Reply(testCtx(t), &tokens{}); err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			if len(reqs) != c.calls {
				t.Fatalf("%d LLM calls, want %d", len(reqs), c.calls)
			}
			if c.calls == 2 {
				r := reqs[0]
				var body struct {
					Temperature    *float64 `json:"temperature"`
					ResponseFormat struct {
						Type       string `json:"type"`
						JSONSchema struct {
							Name string `json:"name"`
						} `json:"json_schema"`
					} `json:"response_format"`
				}
				if err := json.Unmarshal(r.Raw, &body); err != nil {
					t.Fatal(err)
				}
				if r.Stream || body.Temperature == nil || *body.Temperature > 1e-6 || body.ResponseFormat.Type != "json_schema" || body.ResponseFormat.JSONSchema.Name != "route" {
					t.Errorf("router request: stream %v, temperature %v, format %+v", r.Stream, body.Temperature, body.ResponseFormat)
				}
				if !strings.Contains(r.Messages[0].Content, `"Channel rules"`) || r.Messages[1].Content != "can I post links?" {
					t.Errorf("router messages = %+v", r.Messages)
				}
			}
			answer := reqs[len(reqs)-1]
			has := strings.Contains(answer.Messages[len(answer.Messages)-1].Content, `{"documents"`)
			if has != c.wantDocs {
				t.Errorf("answer request has documents: %v, want %v", has, c.wantDocs)
			}
			if got := k.modes(); len(got) != len(c.wantModes) || (len(got) > 1 && got[1] != c.wantModes[1]) || got[0] != c.wantModes[0] {
				t.Errorf("knowledge asked in modes %v, want %v", got, c.wantModes)
			}
		})
	}
}

// A knowledge base that fails is logged, and the turn goes on without it.
func TestKnowledgeFailureDoesNotFailTheTurn(t *testing.T) {
	k := &fakeKnowledge{answer: func(agent.KnowledgeQuery) (agent.KnowledgeResult, error) {
		return agent.KnowledgeResult{}, errors.New("index gone")
	}}
	a, s := newAgentWith(t, func(o *agent.Options) { o.Knowledge = k }, fakellm.Reply{Tokens: []string{"Fine."}})
	a.AddUser("can I post links?")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatal(err)
	}
	if last := s.Requests()[0].Messages; strings.Contains(last[len(last)-1].Content, "documents") {
		t.Error("documents sent despite the failure")
	}
}

// A file is summarised by its name, never its text; the room for a file
// is the window less the fixed parts and a reserve.
func TestFileRoomAndSummaries(t *testing.T) {
	a, _ := newAgentWith(t, func(o *agent.Options) { o.ContextWindow = 4000 })
	room := a.FileRoom()
	if room <= 0 || room >= a.InputBudget() || a.InputBudget() != 3800 {
		t.Fatalf("room %d of input budget %d", room, a.InputBudget())
	}
	if a.NextFileNumber() != 1 {
		t.Fatal("first file is not number 1")
	}
	a.AttachFile(agent.File{Number: 1, Name: "a.txt", Text: "x"})
	if a.NextFileNumber() != 2 {
		t.Fatal("second file is not number 2")
	}
}

func newAgentWith(t *testing.T, mutate func(*agent.Options), replies ...fakellm.Reply) (*agent.Agent, *fakellm.Server) {
	t.Helper()
	s := startLLM(t, fakellm.Script(replies...))
	opts := testOptions(clientFor(s), persona)
	mutate(&opts)
	a := agent.New(opts)
	t.Cleanup(a.Close)
	return a, s
}
