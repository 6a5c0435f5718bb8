package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/agent"
	"koe/app"
	"koe/config"
	"koe/knowledge"
	"koe/testkit/fakellm"
)

// These tests run koe as users do (app.Main over real HTTP and WebSocket,
// bbolt in a temporary directory) with a character that has a knowledge
// base, and assert what the fake LLM receives and what clients are sent.

// ragConf is the default character's conf_uid, whose knowledge base the
// tests fill.
const ragConf = "koe_default"

// ragPersona is the character's persona: the tests find it in requests to
// tell where the documents went.
const ragPersona = "You are Kitsune, a cheerful fox who hosts a radio channel and knows its manuals."

// ragForeignKeyQuestion is answered by the SQLite manual's foreign key page.
const ragForeignKeyQuestion = "Which action applies to a foreign key when I don't write any ON DELETE clause?"

// ragSmallTalk is a line no document speaks to. ("hi, how was your day?"
// would not do: its keywords are "hi" and "day", the date functions' page
// holds "day", and a match of 1 in 2 reaches the default min_match 0.5;
// see TestManualRetrieval's router table.)
const ragSmallTalk = "Tell me a joke about cats."

// ragManual is every page of the SQLite manual in knowledge/testdata.
var ragManual = []string{"cli.html", "datatype3.html", "foreignkeys.html", "json1.html", "lang_datefunc.html",
	"lang_transaction.html", "lockingv3.html", "pragma.html", "queryplanner.html", "wal.html"}

type ragEnv struct {
	t   *testing.T
	llm *fakellm.Server
	koe *app.Main
}

// ragStart runs koe against a fake LLM answering with respond (and its fake
// speech endpoint), with an 8k window: the manual does not fit whole.
func ragStart(t *testing.T, respond func(fakellm.Request) fakellm.Reply, mutate func(*config.Config)) *ragEnv {
	t.Helper()
	llm := startLLM(t, respond)
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Character.Persona = ragPersona
	cfg.Character.LLM.ContextWindow = 8192
	if mutate != nil {
		mutate(&cfg)
	}
	return &ragEnv{t: t, llm: llm, koe: startKoe(t, cfg)}
}

// add puts files of knowledge/testdata into the character's knowledge
// base.
func (e *ragEnv) add(files ...string) {
	e.t.Helper()
	ragAdd(e.t, e.koe.Knowledge(), files...)
}

// ragAdd puts files of knowledge/testdata into the character's knowledge
// base through the service koe runs, counted with the model's tokenizer.
func ragAdd(tb testing.TB, k *knowledge.Service, files ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	count := agent.NewTokenizer(fakellm.ModelID).Count
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join("..", "knowledge", "testdata", f))
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := k.Add(ctx, ragConf, knowledge.Upload{Name: filepath.Base(f), Data: data}, count, nil); err != nil {
			tb.Fatalf("add %s: %v", f, err)
		}
	}
}

// addManual adds the whole SQLite manual.
func (e *ragEnv) addManual() {
	e.t.Helper()
	ragAdd(e.t, e.koe.Knowledge(), ragManualFiles()...)
}

func ragManualFiles() []string {
	out := make([]string, len(ragManual))
	for i, f := range ragManual {
		out[i] = "manual/" + f
	}
	return out
}

// since is the turns' chat requests the fake LLM received after the
// first n: the answers and the router's, not the memory's summaries
// (non-streamed calls made in the background as the history grows).
func (e *ragEnv) since(n int) []fakellm.Request {
	var out []fakellm.Request
	for _, r := range e.llm.Requests() {
		if r.Stream || isRouterCall(r) {
			out = append(out, r)
		}
	}
	return out[n:]
}

// ragDoc is one document of the documents JSON as the model reads it.
type ragDoc struct {
	Document int               `json:"document"`
	Title    string            `json:"title"`
	Metadata map[string]string `json:"metadata"`
	Contents string            `json:"contents"`
}

// ragDocuments finds the documents JSON blocks in a message's content (each
// is one line: its contents' newlines are escaped), in order.
func ragDocuments(t *testing.T, content string) [][]ragDoc {
	t.Helper()
	var out [][]ragDoc
	for _, line := range strings.Split(content, "\n") {
		if !strings.HasPrefix(line, `{"documents":`) {
			continue
		}
		var block struct {
			Documents []ragDoc `json:"documents"`
		}
		if err := json.Unmarshal([]byte(line), &block); err != nil {
			t.Fatalf("documents JSON does not decode: %v\n%s", err, line)
		}
		out = append(out, block.Documents)
	}
	return out
}

// lastUser is the content of a request's last user message.
func lastUser(t *testing.T, r fakellm.Request) string {
	t.Helper()
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	t.Fatalf("no user message in %s", contentOf(r))
	return ""
}

// ragRoute is what a request asked of the router's call: its response
// format and temperature.
type ragRoute struct {
	Temperature    *float64 `json:"temperature"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name string `json:"name"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

func routeOf(t *testing.T, r fakellm.Request) ragRoute {
	t.Helper()
	var rr ragRoute
	if err := json.Unmarshal(r.Raw, &rr); err != nil {
		t.Fatal(err)
	}
	return rr
}

func isRouterCall(r fakellm.Request) bool {
	var rr ragRoute
	return json.Unmarshal(r.Raw, &rr) == nil && rr.ResponseFormat != nil &&
		rr.ResponseFormat.JSONSchema != nil && rr.ResponseFormat.JSONSchema.Name == "route"
}

// statuses are the koe status frames among frames, as "task state text".
func statuses(frames []msg) []string {
	var out []string
	for _, m := range frames {
		if m.typ() != "status" {
			continue
		}
		c, _ := m["content"].(map[string]any)
		task, _ := c["task_id"].(string)
		state, _ := c["state"].(string)
		text, _ := c["content"].(string)
		out = append(out, task+" "+state+" "+text)
	}
	return out
}

func hasStatus(frames []msg, prefix string) bool {
	for _, s := range statuses(frames) {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// citationsIn returns the citations frame among frames (nil: none) and
// whether it came after the final message of the reply.
func citationsIn(frames []msg) (cites []map[string]any, afterFinal bool) {
	final := false
	for _, m := range frames {
		switch m.typ() {
		case "message":
			c, _ := m["content"].(map[string]any)
			if t, _ := c["type"].(string); t == "ai" && len(asSlice(c["tool_calls"])) == 0 {
				final = true
			}
		case "citations":
			for _, c := range asSlice(m["citations"]) {
				cm, _ := c.(map[string]any)
				cites = append(cites, cm)
			}
			return cites, final
		}
	}
	return nil, false
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// answer streams text for the turn's answers and a short summary for the
// memory's own (non-streamed) calls.
func answer(text string) func(fakellm.Request) fakellm.Reply {
	return func(r fakellm.Request) fakellm.Reply {
		if !r.Stream {
			return fakellm.Reply{Tokens: []string{"They talked."}}
		}
		return fakellm.Reply{Tokens: fakellm.Words(text)}
	}
}

// With the auto router and a knowledge base too large to read whole, a
// question the manual answers gets its best passages: the documents JSON
// in the last user message above the persona, the citation section in the
// system prompt and the reminder at the very end, in the one LLM call of
// the turn (the auto router makes none). Small talk gets no documents.
// A koe client sees the search as status frames.
func TestRAGAutoRouterLargeBase(t *testing.T) {
	e := ragStart(t, answer("It defaults to NO ACTION [1]."), nil)
	e.addManual()
	c := dialKoe(t, e.koe.Addr())

	frames := c.turn(ragForeignKeyQuestion)
	reqs := e.since(0)
	if len(reqs) != 1 || !reqs[0].Stream || isRouterCall(reqs[0]) {
		t.Fatalf("want exactly one streamed answer call and no router call, got %d requests:\n%s", len(reqs), contentOf(reqs[0]))
	}
	r := reqs[0]
	last := lastUser(t, r)
	docs := ragDocuments(t, last)
	if len(docs) != 1 || len(docs[0]) == 0 {
		t.Fatalf("want one documents JSON block with passages in the last user message, got %d blocks:\n%s", len(docs), last)
	}
	if i, j := strings.Index(last, `{"documents":`), strings.Index(last, ragPersona); i < 0 || j < 0 || i > j {
		t.Errorf("the documents JSON (at %d) must come above the persona (at %d):\n%s", i, j, last)
	}
	if !strings.HasSuffix(strings.TrimSpace(last), "Cite the documents you used by their number, like [1].") {
		t.Errorf("the request must end with the citation reminder:\n…%s", last[max(0, len(last)-300):])
	}
	if sys := r.Messages[0]; sys.Role != "system" || !strings.Contains(sys.Content, "Citations: the documents in this conversation are numbered") {
		t.Errorf("the system prompt lacks the citation section:\n%s", sys.Content)
	}
	answered := false
	for i, d := range docs[0] {
		if d.Document != i+1 {
			t.Errorf("passage %d is numbered %d", i, d.Document)
		}
		if d.Metadata["file"] == "" || d.Title == "" || d.Contents == "" {
			t.Errorf("passage %d lacks its file, title or contents: %+v", i, d)
		}
		answered = answered || d.Metadata["file"] == "foreignkeys.html" && strings.Contains(strings.Join(strings.Fields(d.Contents), " "), `it defaults to "NO ACTION"`)
	}
	if !answered {
		t.Errorf("no passage holds the answer (foreignkeys.html: it defaults to \"NO ACTION\"); got %d passages", len(docs[0]))
	}
	if !hasStatus(frames, "knowledge start Searching the documents") {
		t.Errorf("no status start for the search: %q", statuses(frames))
	}
	if !hasStatus(frames, "knowledge end Found ") || !strings.Contains(strings.Join(statuses(frames), "\n"), "foreignkeys.html") {
		t.Errorf("no status end naming what was found: %q", statuses(frames))
	}
	if cites, after := citationsIn(frames); len(cites) != 1 || !after || cites[0]["file"] == "" {
		t.Errorf("citations frame: %v (after the final message: %v)", cites, after)
	}

	c.turn(ragSmallTalk)
	reqs = e.since(1)
	if len(reqs) != 1 {
		t.Fatalf("small talk: want one LLM call, got %d", len(reqs))
	}
	if got := contentOf(reqs[0]); strings.Contains(got, `{"documents":`) || strings.Contains(got, "Cite the documents") {
		t.Errorf("small talk got documents or the citation reminder:\n%s", got)
	}
}

// A small knowledge base is read whole every turn, even for small talk,
// near the end of the history: after the earlier turns, above the persona.
func TestRAGSmallBaseWhole(t *testing.T) {
	e := ragStart(t, answer("What a lovely day at the lighthouse."), nil)
	e.add("story.md")
	c := dialKoe(t, e.koe.Addr())
	c.turn(ragSmallTalk)
	c.turn("And what did you do in the evening?")

	reqs := e.since(0)
	if len(reqs) != 2 {
		t.Fatalf("want 2 LLM calls, got %d", len(reqs))
	}
	for i, r := range reqs {
		last := lastUser(t, r)
		docs := ragDocuments(t, last)
		if len(docs) != 1 || len(docs[0]) != 1 {
			t.Fatalf("turn %d: want the story as one document in the last user message, got %v", i+1, docs)
		}
		d := docs[0][0]
		if d.Document != 1 || d.Title != "The Salt Lantern: Story Bible" || d.Metadata["file"] != "story.md" ||
			!strings.Contains(d.Contents, "lighthouses burn salt instead of oil") {
			t.Errorf("turn %d: document = %+v", i+1, d)
		}
		if strings.Index(last, `{"documents":`) > strings.Index(last, ragPersona) {
			t.Errorf("turn %d: the documents come below the persona", i+1)
		}
		if got := strings.Count(contentOf(r), `{"documents":`); got != 1 {
			t.Errorf("turn %d: the story is sent %d times", i+1, got)
		}
	}
	// The second request: system, the first turn, then the documents with
	// the persona and the new message.
	r := reqs[1]
	n := len(r.Messages)
	if n < 4 || r.Messages[n-2].Role != "assistant" || r.Messages[n-3].Content != ragSmallTalk {
		t.Fatalf("second request does not end with the first turn then the documents:\n%s", contentOf(r))
	}
}

// The llm router asks first (one non-streamed call with the "route"
// schema at temperature ~0) and then answers: with the documents when it
// routes to rag, without when it routes to the agent or fails.
func TestRAGLLMRouter(t *testing.T) {
	routes := make(chan fakellm.Reply, 3)
	e := ragStart(t, func(r fakellm.Request) fakellm.Reply {
		if isRouterCall(r) {
			select {
			case rep := <-routes:
				return rep
			default:
				return fakellm.Reply{Status: 500, ErrorMessage: "no route scripted"}
			}
		}
		return answer("Here you are.")(r)
	}, func(c *config.Config) { c.Knowledge.Router = knowledge.RouterLLM })
	e.addManual()
	c := dialKoe(t, e.koe.Addr())

	cases := []struct {
		name, text string
		route      fakellm.Reply
		docs       bool
		status     string
	}{
		{"rag", ragForeignKeyQuestion, fakellm.Reply{Tokens: []string{`{"route":"rag","reason":"a question about foreign keys"}`}}, true, "router end Searching the documents"},
		{"agent", ragSmallTalk, fakellm.Reply{Tokens: []string{`{"route":"agent","reason":"small talk"}`}}, false, "router end Answering without the documents"},
		{"failure", ragForeignKeyQuestion, fakellm.Reply{Status: 500, ErrorMessage: "the router model is down"}, false, "router error Answering without the documents"},
	}
	seen := 0
	for _, tc := range cases {
		routes <- tc.route
		frames := c.turn(tc.text)
		reqs := e.since(seen)
		seen += len(reqs)
		if len(reqs) != 2 {
			t.Fatalf("%s: want the router's call and the answer, got %d calls", tc.name, len(reqs))
		}
		router, ans := reqs[0], reqs[1]
		if !isRouterCall(router) || router.Stream {
			t.Fatalf("%s: the first call is not the non-streamed router call: %s", tc.name, router.Raw)
		}
		rr := routeOf(t, router)
		if rr.ResponseFormat.Type != "json_schema" || rr.Temperature == nil || *rr.Temperature > 1e-6 || len(router.Tools) > 0 {
			t.Errorf("%s: router call: response_format %q, temperature %v, tools %v", tc.name, rr.ResponseFormat.Type, rr.Temperature, router.Tools)
		}
		if got := lastUser(t, router); got != tc.text {
			t.Errorf("%s: the router read %q, want the user's message", tc.name, got)
		}
		if !strings.Contains(router.Messages[0].Content, "SQLite Foreign Key Support") {
			t.Errorf("%s: the router is not told the documents' titles:\n%s", tc.name, router.Messages[0].Content)
		}
		if !ans.Stream || isRouterCall(ans) {
			t.Fatalf("%s: the second call is not the streamed answer", tc.name)
		}
		got := len(ragDocuments(t, lastUser(t, ans))) > 0
		if got != tc.docs {
			t.Errorf("%s: documents in the answer's request: %v, want %v\n%s", tc.name, got, tc.docs, lastUser(t, ans))
		}
		if !hasStatus(frames, tc.status) {
			t.Errorf("%s: want a status %q, got %q", tc.name, tc.status, statuses(frames))
		}
	}
}

// With the router off, the model gets the search_documents tool: its
// result is the documents JSON, the answer's [1] is mapped to the file in
// the citations frame.
func TestRAGRouterOffSearchTool(t *testing.T) {
	e := ragStart(t, func(r fakellm.Request) fakellm.Reply {
		if !r.Stream {
			return fakellm.Reply{Tokens: []string{"They talked."}}
		}
		if !slices.ContainsFunc(r.Messages, func(m fakellm.Message) bool { return m.Role == "tool" }) {
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "s1", Name: "search_documents", Arguments: `{"query":"default action ON DELETE foreign key"}`}}}
		}
		return fakellm.Reply{Tokens: fakellm.Words(`Without a clause it is "NO ACTION" [1].`)}
	}, func(c *config.Config) { c.Knowledge.Router = knowledge.RouterOff })
	e.addManual()
	c := dialKoe(t, e.koe.Addr())
	frames := c.turn(ragForeignKeyQuestion)

	reqs := e.since(0)
	if len(reqs) != 2 {
		t.Fatalf("want the call that searches and the answer, got %d calls", len(reqs))
	}
	found := false
	for _, name := range reqs[0].Tools {
		found = found || name == "search_documents"
	}
	if !found {
		t.Fatalf("search_documents is not offered: %v", reqs[0].Tools)
	}
	if strings.Contains(contentOf(reqs[0]), `{"documents":`) {
		t.Errorf("with the router off, no documents before the model searches:\n%s", contentOf(reqs[0]))
	}
	ans := reqs[1]
	// The tool's result, then the citation reminder last.
	n := len(ans.Messages)
	result := ans.Messages[n-2]
	if result.Role != "tool" || result.ToolCallID != "s1" {
		t.Fatalf("the answer's request does not end with the tool result: %+v", result)
	}
	if last := ans.Messages[n-1]; last.Role != "user" || last.Content != "Cite the documents you used by their number, like [1]." {
		t.Errorf("the answer's request does not end with the citation reminder: %+v", last)
	}
	docs := ragDocuments(t, result.Content)
	if len(docs) != 1 || len(docs[0]) == 0 || docs[0][0].Document != 1 {
		t.Fatalf("the tool result is not numbered documents JSON: %s", result.Content)
	}
	if !strings.Contains(ans.Messages[0].Content, "the search results in this turn are numbered documents") {
		t.Errorf("the system prompt lacks the search citation note:\n%s", ans.Messages[0].Content)
	}
	cites, after := citationsIn(frames)
	if len(cites) != 1 || !after {
		t.Fatalf("citations frame: %v (after the final message: %v)", cites, after)
	}
	if n, _ := cites[0]["document"].(float64); n != 1 || cites[0]["file"] != docs[0][0].Metadata["file"] || cites[0]["title"] != docs[0][0].Title {
		t.Errorf("citation [1] = %v, want the first search result %+v", cites[0], docs[0][0].Metadata)
	}
}

// A reply that cites a document: a koe client gets the citations frame
// after the final message, naming the file, title and section; every text
// the client is shown keeps "[1]", and nothing sent to speech has it.
func TestRAGCitationsShownNotSpoken(t *testing.T) {
	e := ragStart(t, answer("Only moderators may post links [1]. Anything else?"), nil)
	e.add("rules.html")
	c := dialKoe(t, e.koe.Addr())
	frames := c.turn("Can I post a link to my stream?")

	cites, after := citationsIn(frames)
	if len(cites) != 1 || !after {
		t.Fatalf("citations frame: %v (after the final message: %v); frames %q", cites, after, types(frames))
	}
	if n, _ := cites[0]["document"].(float64); n != 1 || cites[0]["file"] != "rules.html" || cites[0]["title"] != "Channel Rules – Kitsune Radio" {
		t.Errorf("citation = %v", cites[0])
	}
	var tokens, display, final strings.Builder
	for _, m := range frames {
		switch m.typ() {
		case "token":
			tokens.WriteString(m.str("content"))
		case "audio":
			if d, ok := m["display_text"].(map[string]any); ok {
				s, _ := d["text"].(string)
				display.WriteString(s + " ")
			}
		case "message":
			if c, _ := m["content"].(map[string]any); c["type"] == "ai" {
				s, _ := c["content"].(string)
				final.WriteString(s)
			}
		}
	}
	for what, text := range map[string]string{"tokens": tokens.String(), "audio display text": display.String(), "final message": final.String()} {
		if !strings.Contains(text, "links [1].") {
			t.Errorf("%s lose the marker: %q", what, text)
		}
	}
	speech := e.llm.SpeechRequests()
	if len(speech) == 0 {
		t.Fatal("nothing was sent to speech")
	}
	spoken := ""
	for _, s := range speech {
		spoken += s.Input + "|"
		if strings.Contains(s.Input, "[") || strings.Contains(s.Input, "1]") {
			t.Errorf("speech was asked to say %q", s.Input)
		}
	}
	if !strings.Contains(spoken, "Only moderators may post links") {
		t.Errorf("speech = %q", spoken)
	}
}

// A file attached over the WebSocket rides with the next message as
// documents JSON numbered 1, and the knowledge base's passages of that
// turn are numbered after it; the citations frame tells them apart.
func TestRAGAttachedFileNumberedFirst(t *testing.T) {
	e := ragStart(t, answer("The notes say so [1], and so does the manual [2]."), nil)
	e.addManual()
	c := dialKoe(t, e.koe.Addr())
	note := "# Migration notes\n\nWe turn foreign keys on at every connection before the migration runs.\n"
	ack := c.request(msg{"type": "attach-file", "name": "notes.md", "mime": "text/markdown",
		"data": base64.StdEncoding.EncodeToString([]byte(note))}, "file-attached")
	if f, _ := ack["file"].(map[string]any); f["document"] != float64(1) || f["name"] != "notes.md" {
		t.Fatalf("file-attached = %v", ack)
	}
	frames := c.turn(ragForeignKeyQuestion)

	reqs := e.since(0)
	if len(reqs) != 1 {
		t.Fatalf("want one LLM call, got %d", len(reqs))
	}
	last := lastUser(t, reqs[0])
	blocks := ragDocuments(t, last)
	var file []ragDoc
	var passages []ragDoc
	for _, b := range blocks {
		if len(b) == 1 && b[0].Metadata["file"] == "notes.md" {
			file = b
		} else {
			passages = append(passages, b...)
		}
	}
	if len(file) != 1 || file[0].Document != 1 || !strings.Contains(file[0].Contents, "foreign keys on at every connection") {
		t.Fatalf("the attached file is not document 1 of the last user message: %+v\n%s", blocks, last)
	}
	if len(passages) == 0 {
		t.Fatalf("no knowledge passages beside the file:\n%s", last)
	}
	for i, p := range passages {
		if p.Document != i+2 {
			t.Errorf("passage %d is numbered %d, want %d (after the file)", i, p.Document, i+2)
		}
	}
	if i, j := strings.Index(last, `"file":"notes.md"`), strings.Index(last, ragForeignKeyQuestion); i < 0 || j < i {
		t.Errorf("the file must ride right above the user's words (file at %d, words at %d)", i, j)
	}
	cites, _ := citationsIn(frames)
	if len(cites) != 2 || cites[0]["file"] != "notes.md" || cites[1]["file"] != passages[0].Metadata["file"] {
		t.Errorf("citations = %v, want notes.md then %s", cites, passages[0].Metadata["file"])
	}
}
