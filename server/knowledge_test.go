package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"koe/testkit/fakellm"
)

// kbPart is one part of a multipart upload.
type kbPart struct {
	field, filename, mime string
	data                  []byte
}

// kbRefusal and kbDoc are the knowledge API's answers as a client reads
// them.
type kbRefusal struct {
	Filename string `json:"filename"`
	Reason   string `json:"reason"`
	Kind     string `json:"kind"`
}

type kbDoc struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Format string `json:"format"`
	Title  string `json:"title"`
	Bytes  int    `json:"bytes"`
	Tokens int    `json:"tokens"`
	Pages  int    `json:"pages"`
	Chunks int    `json:"chunks"`
}

type kbAnswer struct {
	ConfUID    string      `json:"conf_uid"`
	HistoryUID string      `json:"history_uid"`
	Added      []kbDoc     `json:"added"`
	Refused    []kbRefusal `json:"refused"`
	Documents  []kbDoc     `json:"documents"`
	Tokens     int         `json:"tokens"`
	Deleted    bool        `json:"deleted"`
	MaxFile    int         `json:"max_file_bytes"`
	File       struct {
		Document int    `json:"document"`
		Name     string `json:"name"`
		Title    string `json:"title"`
		Format   string `json:"format"`
		Bytes    int    `json:"bytes"`
		Tokens   int    `json:"tokens"`
	} `json:"file"`
	Error string `json:"error"`
}

// kbFile reads one of the knowledge package's test files.
func kbFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "knowledge", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// kbFilePart is a "file" part holding a test file under its own name.
func kbFilePart(t *testing.T, name, mime string) kbPart {
	return kbPart{field: "file", filename: name, mime: mime, data: kbFile(t, name)}
}

// kbMultipart builds a multipart/form-data body.
func kbMultipart(t *testing.T, parts ...kbPart) (body []byte, contentType string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		disp := fmt.Sprintf(`form-data; name=%q`, p.field)
		if p.filename != "" {
			disp += fmt.Sprintf(`; filename=%q`, p.filename)
		}
		h.Set("Content-Disposition", disp)
		if p.mime != "" {
			h.Set("Content-Type", p.mime)
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pw.Write(p.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), w.FormDataContentType()
}

// kbDo sends a request with optional headers ("Name: value") and decodes
// the JSON answer.
func kbDo(t *testing.T, method, url, contentType string, body []byte, headers ...string) (int, kbAnswer) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Set(name, value)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var a kbAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON", method, url, resp.StatusCode, data)
	}
	return resp.StatusCode, a
}

// kbUpload posts parts to url as multipart/form-data.
func kbUpload(t *testing.T, url string, parts []kbPart, headers ...string) (int, kbAnswer) {
	t.Helper()
	body, ctype := kbMultipart(t, parts...)
	return kbDo(t, "POST", url, ctype, body, headers...)
}

// kbDocsURL is a character's documents route.
func kbDocsURL(addr, conf string) string {
	return "http://" + addr + "/api/characters/" + conf + "/documents"
}

// kbList lists a character's documents by name.
func kbList(t *testing.T, addr, conf string, headers ...string) map[string]kbDoc {
	t.Helper()
	status, a := kbDo(t, "GET", kbDocsURL(addr, conf), "", nil, headers...)
	if status != 200 || a.ConfUID != conf || a.Documents == nil || a.MaxFile <= 0 {
		t.Fatalf("list documents: %d %+v", status, a)
	}
	out := map[string]kbDoc{}
	sum := 0
	for _, d := range a.Documents {
		out[d.Name] = d
		sum += d.Tokens
	}
	if a.Tokens != sum {
		t.Fatalf("list says %d tokens, its documents %d", a.Tokens, sum)
	}
	return out
}

// kbRequestFor is the latest request to the LLM whose last user message
// holds question (recall's own calls to the LLM are not it).
func kbRequestFor(t *testing.T, llm *fakellm.Server, question string) fakellm.Request {
	t.Helper()
	reqs := llm.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		msgs := reqs[i].Messages
		for j := len(msgs) - 1; j >= 0; j-- {
			if msgs[j].Role == "user" {
				if strings.Contains(msgs[j].Content, question) {
					return reqs[i]
				}
				break
			}
		}
	}
	t.Fatalf("no request to the LLM asks %q", question)
	return fakellm.Request{}
}

// kbLastUser is the request's last user message.
func kbLastUser(r fakellm.Request) string {
	for j := len(r.Messages) - 1; j >= 0; j-- {
		if r.Messages[j].Role == "user" {
			return r.Messages[j].Content
		}
	}
	return ""
}

// kbDocument is one document of the documents JSON the model reads.
type kbDocument struct {
	Document int               `json:"document"`
	Title    string            `json:"title"`
	Metadata map[string]string `json:"metadata"`
	Contents string            `json:"contents"`
}

// kbDocuments finds the documents JSON (one line) in a message.
func kbDocuments(content string) ([]kbDocument, bool) {
	for _, line := range strings.Split(content, "\n") {
		if !strings.HasPrefix(line, `{"documents"`) {
			continue
		}
		var v struct {
			Documents []kbDocument `json:"documents"`
		}
		if json.Unmarshal([]byte(line), &v) != nil {
			return nil, false
		}
		return v.Documents, true
	}
	return nil, false
}

// kbAwait reads frames until one of the given types and returns it.
func kbAwait(c *client, types ...string) msg {
	c.t.Helper()
	for {
		m := c.next()
		for _, typ := range types {
			if m.typ() == typ {
				return m
			}
		}
	}
}

// TestKnowledgeUploads: every good file is taken and counted, every bad
// one is refused with its own status and reason and leaves nothing
// behind; uploading a file again replaces it; delete removes it.
func TestKnowledgeUploads(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Noted.")}))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	conf := koeConf(t)
	url := kbDocsURL(m.Addr(), conf)

	// Refusals first, on an empty knowledge base.
	refusals := []struct {
		name, file, mime string
		status           int
		kind, says       string
	}{
		{"empty", "empty.txt", "text/plain", 422, "empty", "empty"},
		{"image", "image.png", "image/png", 415, "type", ""},
		{"corrupt PDF", "broken.pdf", "application/pdf", 422, "corrupt", ""},
		{"encrypted PDF", "encrypted.pdf", "application/pdf", 422, "encrypted", "password"},
	}
	for _, r := range refusals {
		status, a := kbUpload(t, url, []kbPart{kbFilePart(t, r.file, r.mime)})
		if status != r.status || len(a.Added) != 0 || len(a.Refused) != 1 || a.ConfUID != conf {
			t.Fatalf("%s: %d %+v, want %d with one refusal", r.name, status, a, r.status)
		}
		got := a.Refused[0]
		if got.Filename != r.file || got.Kind != r.kind || got.Reason == "" || !strings.Contains(got.Reason, r.says) ||
			!strings.Contains(a.Error, r.file) || !strings.Contains(a.Error, got.Reason) {
			t.Fatalf("%s: refusal %+v (error %q), want kind %s saying %q", r.name, got, a.Error, r.kind, r.says)
		}
	}
	// Several refused in one request: the first one's status, all listed.
	status, a := kbUpload(t, url, []kbPart{kbFilePart(t, "image.png", "image/png"), kbFilePart(t, "empty.txt", "")})
	if status != 415 || len(a.Refused) != 2 || a.Refused[1].Kind != "empty" || !strings.Contains(a.Error, "none of the 2 files") {
		t.Fatalf("two refused files: %d %+v", status, a)
	}
	// Requests that carry no file.
	status, a = kbUpload(t, url, []kbPart{{field: "document", filename: "story.md", data: kbFile(t, "story.md")}})
	if status != 400 || !strings.Contains(a.Error, `"file"`) {
		t.Fatalf("no file part: %d %q", status, a.Error)
	}
	status, a = kbDo(t, "POST", url, "application/json", []byte(`{"file":"story.md"}`))
	if status != 415 || !strings.Contains(a.Error, "multipart/form-data") {
		t.Fatalf("JSON body: %d %q", status, a.Error)
	}
	status, a = kbDo(t, "POST", url, "multipart/form-data; boundary=xyz", []byte("--xyz\r\nnot a header line\r\n"))
	if status != 400 || !strings.Contains(a.Error, "multipart") {
		t.Fatalf("broken multipart: %d %q", status, a.Error)
	}
	status, a = kbUpload(t, kbDocsURL(m.Addr(), "nobody"), []kbPart{kbFilePart(t, "story.md", "text/markdown")})
	if status != 404 || !strings.Contains(a.Error, "nobody") {
		t.Fatalf("unknown character: %d %q", status, a.Error)
	}

	// Nothing was kept: not in the list, not in a turn.
	if docs := kbList(t, m.Addr(), conf); len(docs) != 0 {
		t.Fatalf("refused files were kept: %+v", docs)
	}
	say(t, m.Addr(), "", "anything in the files?")
	if r := kbRequestFor(t, llm, "anything in the files?"); strings.Contains(contentOf(r), `{"documents"`) {
		t.Fatalf("a turn after refusals reads documents:\n%s", contentOf(r))
	}

	// Good files, one per request and two in one; a folder in the name is
	// dropped.
	good := []struct{ file, mime, format string }{
		{"handbook.pdf", "application/pdf", "pdf"},
		{"rules.html", "text/html", "html"},
		{"config.json", "application/json", "json"},
	}
	for _, g := range good {
		status, a := kbUpload(t, url, []kbPart{kbFilePart(t, g.file, g.mime)})
		if status != 201 || len(a.Added) != 1 || len(a.Refused) != 0 || a.Error != "" {
			t.Fatalf("%s: %d %+v", g.file, status, a)
		}
		d := a.Added[0]
		if d.Name != g.file || d.Format != g.format || d.Tokens <= 0 || d.Chunks <= 0 || d.Bytes != len(kbFile(t, g.file)) || d.ID == "" {
			t.Fatalf("%s: added %+v", g.file, d)
		}
	}
	story := kbFilePart(t, "story.md", "text/markdown")
	story.filename = "../../secret/story.md"
	status, a = kbUpload(t, url, []kbPart{story, kbFilePart(t, "empty.txt", "text/plain")})
	if status != 201 || len(a.Added) != 1 || a.Added[0].Name != "story.md" || len(a.Refused) != 1 || a.Refused[0].Kind != "empty" {
		t.Fatalf("story.md with a refused file: %d %+v", status, a)
	}
	docs := kbList(t, m.Addr(), conf)
	if len(docs) != 4 {
		t.Fatalf("listed %+v, want 4 documents", docs)
	}
	for _, name := range []string{"handbook.pdf", "rules.html", "config.json", "story.md"} {
		if d := docs[name]; d.Tokens <= 0 || d.Chunks <= 0 {
			t.Fatalf("%s listed as %+v", name, d)
		}
	}
	if docs["handbook.pdf"].Pages < 1 {
		t.Fatalf("handbook.pdf has no pages: %+v", docs["handbook.pdf"])
	}

	// The next turn reads them.
	say(t, m.Addr(), "", "what does the story bible say about Veyra?")
	if c := contentOf(kbRequestFor(t, llm, "Veyra?")); !strings.Contains(c, `{"documents"`) || !strings.Contains(c, "Salt Guild") {
		t.Fatalf("the turn after uploads reads no documents:\n%s", c)
	}

	// Uploading story.md again replaces it.
	longer := append(kbFile(t, "story.md"), []byte("\n\n## Epilogue\n\nThe fog lifted over Veyra for the first time in a hundred years.\n")...)
	status, a = kbUpload(t, url, []kbPart{{field: "file", filename: "story.md", mime: "text/markdown", data: longer}})
	if status != 201 || len(a.Added) != 1 || a.Added[0].ID != docs["story.md"].ID {
		t.Fatalf("re-upload: %d %+v (first id %s)", status, a, docs["story.md"].ID)
	}
	after := kbList(t, m.Addr(), conf)
	if len(after) != 4 || after["story.md"].Bytes != len(longer) || after["story.md"].Tokens <= docs["story.md"].Tokens {
		t.Fatalf("after re-upload: %+v", after)
	}

	// Delete removes it, once.
	id := after["story.md"].ID
	status, a = kbDo(t, "DELETE", url+"/"+id, "", nil)
	if status != 200 || !a.Deleted {
		t.Fatalf("delete: %d %+v", status, a)
	}
	if left := kbList(t, m.Addr(), conf); len(left) != 3 || left["story.md"].ID != "" {
		t.Fatalf("after delete: %+v", left)
	}
	status, a = kbDo(t, "DELETE", url+"/"+id, "", nil)
	if status != 404 || a.Error == "" {
		t.Fatalf("delete again: %d %+v", status, a)
	}
	status, a = kbDo(t, "DELETE", url+"/..%2F..%2Fetc", "", nil)
	if status != 400 && status != 404 {
		t.Fatalf("delete a path: %d %+v", status, a)
	}
}

// TestKnowledgeLimits: knowledge.max_file_bytes and max_documents refuse
// with their names; uploads may be larger than server.max_message_bytes
// while other requests stay within it.
func TestKnowledgeLimits(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Noted.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.MaxMessageBytes = 16 << 10
	cfg.Knowledge.MaxFileBytes = 4 << 10
	cfg.Knowledge.MaxDocuments = 1
	m := startKoe(t, cfg)
	conf := cfg.Character.ConfUID
	url := kbDocsURL(m.Addr(), conf)

	// Over knowledge.max_file_bytes, within what the route reads: the
	// knowledge service refuses it.
	status, a := kbUpload(t, url, []kbPart{kbFilePart(t, "handbook.pdf", "application/pdf")})
	if status != 413 || len(a.Refused) != 1 || a.Refused[0].Kind != "too_large" || !strings.Contains(a.Refused[0].Reason, "knowledge.max_file_bytes") {
		t.Fatalf("handbook.pdf over 4 KB: %d %+v", status, a)
	}
	// A body larger than any upload may be: refused from its headers,
	// before it is read (a raw connection, because koe closes it then,
	// and a client still writing the body may see the reset first).
	resps, _ := rawExchange(t, m.Addr(), "POST /api/characters/"+conf+"/documents HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
		"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 200000\r\n\r\n")
	if len(resps) != 1 || resps[0].status != 413 || !strings.Contains(resps[0].body, "knowledge.max_file_bytes") {
		t.Fatalf("a 200 KB upload: %+v", resps)
	}
	resps, _ = rawExchange(t, m.Addr(), "PUT /api/characters/"+conf+"/prompts/system HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
		"Content-Type: application/json\r\nContent-Length: 200000\r\n\r\n")
	if len(resps) != 1 || resps[0].status != 413 || !strings.Contains(resps[0].body, "server.max_message_bytes") {
		t.Fatalf("a 200 KB prompt: %+v", resps)
	}
	if docs := kbList(t, m.Addr(), conf); len(docs) != 0 {
		t.Fatalf("oversized files were kept: %+v", docs)
	}

	// An upload larger than server.max_message_bytes (16 KB) but within
	// knowledge.max_file_bytes is fine on the upload routes only...
	cfg2 := testConfig(t, t.TempDir(), llm.URL())
	cfg2.Server.MaxMessageBytes = 16 << 10
	cfg2.Knowledge.MaxDocuments = 1
	m2 := startKoe(t, cfg2)
	url2 := kbDocsURL(m2.Addr(), conf)
	status, a = kbUpload(t, url2, []kbPart{kbFilePart(t, "handbook.pdf", "application/pdf")})
	if status != 201 || len(a.Added) != 1 {
		t.Fatalf("an 18 KB upload with 16 KB messages: %d %+v", status, a)
	}
	// ...while other requests of that size are refused, naming the key.
	prompt, _ := json.Marshal(map[string]string{"text": strings.Repeat("Be kind. ", 2500)})
	status, a = kbDo(t, "PUT", "http://"+m2.Addr()+"/api/characters/"+conf+"/prompts/system", "application/json", prompt)
	if status != 413 || !strings.Contains(a.Error, "server.max_message_bytes") {
		t.Fatalf("a 22 KB prompt with 16 KB messages: %d %q", status, a.Error)
	}
	// The same body to a path that only looks like an upload route.
	status, a = kbDo(t, "POST", "http://"+m2.Addr()+"/api/characters/"+conf+"/documents/extra", "application/json", prompt)
	if status != 413 {
		t.Fatalf("a 22 KB POST beside the upload route: %d %q", status, a.Error)
	}

	// knowledge.max_documents: a second document is refused; replacing
	// the one there is not.
	status, a = kbUpload(t, url2, []kbPart{kbFilePart(t, "story.md", "text/markdown")})
	if status != 422 || len(a.Refused) != 1 || a.Refused[0].Kind != "too_many" || !strings.Contains(a.Refused[0].Reason, "knowledge.max_documents") {
		t.Fatalf("a second document with max_documents 1: %d %+v", status, a)
	}
	if docs := kbList(t, m2.Addr(), conf); len(docs) != 1 || docs["handbook.pdf"].Tokens <= 0 {
		t.Fatalf("after too many: %+v", docs)
	}
	status, a = kbUpload(t, url2, []kbPart{kbFilePart(t, "handbook.pdf", "application/pdf")})
	if status != 201 {
		t.Fatalf("replacing the one document: %d %+v", status, a)
	}
}

// TestKnowledgeAttach: a file attached over REST or WebSocket rides, as
// the documents JSON, with the next user message in its history.
func TestKnowledgeAttach(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("I read it.")}))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	conf := koeConf(t)

	// REST: attach to a stored history, then talk in it over WebSocket.
	uid := say(t, m.Addr(), "", "hello there")
	filesURL := "http://" + m.Addr() + "/api/histories/" + conf + "/" + uid + "/files"
	status, a := kbUpload(t, filesURL, []kbPart{kbFilePart(t, "story.md", "text/markdown")})
	if status != 201 || a.HistoryUID != uid || a.File.Name != "story.md" || a.File.Document != 1 || a.File.Tokens <= 0 || a.File.Format != "markdown" {
		t.Fatalf("attach story.md: %d %+v", status, a)
	}
	c := dialKoe(t, m.Addr())
	c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")
	c.turn("who keeps the Gull Point lighthouse?")
	user := kbLastUser(kbRequestFor(t, llm, "Gull Point lighthouse?"))
	docs, ok := kbDocuments(user)
	if !ok || len(docs) != 1 || strings.Index(user, `{"documents"`) > strings.Index(user, "Gull Point lighthouse?") {
		t.Fatalf("the user message does not carry the file as documents JSON before the question:\n%s", user)
	}
	if d := docs[0]; d.Document != 1 || d.Metadata["file"] != "story.md" || !strings.Contains(d.Contents, "Ila Marrow") {
		t.Fatalf("the attached file reached the model as %+v", d)
	}

	// Refusals and mistakes on the REST route.
	status, a = kbUpload(t, filesURL, []kbPart{kbFilePart(t, "broken.pdf", "application/pdf")})
	if status != 422 || len(a.Refused) != 1 || a.Refused[0].Kind != "corrupt" || a.HistoryUID != uid {
		t.Fatalf("attach broken.pdf: %d %+v", status, a)
	}
	status, a = kbUpload(t, filesURL, []kbPart{kbFilePart(t, "story.md", ""), kbFilePart(t, "rules.html", "")})
	if status != 400 || !strings.Contains(a.Error, "one file") {
		t.Fatalf("attach two files: %d %+v", status, a)
	}
	status, a = kbUpload(t, "http://"+m.Addr()+"/api/histories/"+conf+"/2025-01-01_00-00-00_none/files", []kbPart{kbFilePart(t, "story.md", "")})
	if status != 404 {
		t.Fatalf("attach to no history: %d %+v", status, a)
	}

	// WebSocket: attach-file to the open history, then a turn.
	w := dialKoe(t, m.Addr())
	w.send(msg{"type": "attach-file", "name": "rules.html", "mime": "text/html", "data": base64.StdEncoding.EncodeToString(kbFile(t, "rules.html"))})
	got := kbAwait(w, "file-attached", "file-refused", "error")
	file, _ := got["file"].(map[string]any)
	if got.typ() != "file-attached" || got.str("history_uid") == "" || file["name"] != "rules.html" || file["document"] != 1.0 || file["tokens"].(float64) <= 0 {
		t.Fatalf("attach-file rules.html: %v", got)
	}
	w.turn("what are the channel rules?")
	user = kbLastUser(kbRequestFor(t, llm, "channel rules?"))
	if docs, ok := kbDocuments(user); !ok || len(docs) != 1 || docs[0].Document != 1 || docs[0].Metadata["file"] != "rules.html" ||
		!strings.Contains(docs[0].Contents, "rules") || strings.Contains(user, "TRACKING-PIXEL") {
		t.Fatalf("the turn after attach-file reads:\n%s", user)
	}

	// Malformed base64: an error frame, and the connection works on.
	w.expectError(msg{"type": "attach-file", "name": "x.txt", "mime": "text/plain", "data": "not base64!!"}, "base64")
	w.alive()
	w.send(msg{"type": "attach-file", "name": "empty.txt", "mime": "text/plain", "data": ""})
	if got := kbAwait(w, "file-attached", "file-refused", "error"); got.typ() != "file-refused" || got.str("kind") != "empty" || got.str("filename") != "empty.txt" {
		t.Fatalf("attach-file of an empty file: %v", got)
	}
	w.turn("and now?")
	if user := kbLastUser(kbRequestFor(t, llm, "and now?")); strings.Contains(user, `{"documents"`) {
		t.Fatalf("a refused file rode with the next message:\n%s", user)
	}
}

// TestKnowledgeAttachTooLong: a file that cannot fit the model's window
// is refused with both numbers, and nothing of it is kept.
func TestKnowledgeAttachTooLong(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Short.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.LLM.ContextWindow = 4096
	m := startKoe(t, cfg)
	long := bytes.Repeat(kbFile(t, "story.md"), 20)
	c := dialKoe(t, m.Addr())
	c.send(msg{"type": "attach-file", "name": "saga.md", "mime": "text/markdown", "data": base64.StdEncoding.EncodeToString(long)})
	got := kbAwait(c, "file-attached", "file-refused", "error")
	numbers := regexp.MustCompile(`it is ([\d,]+) tokens long: the model's window leaves ([\d,]+) for it`).FindStringSubmatch(got.str("reason"))
	if got.typ() != "file-refused" || got.str("kind") != "too_long" || got.str("filename") != "saga.md" || numbers == nil {
		t.Fatalf("attach-file of a long file: %v", got)
	}
	size, _ := strconv.Atoi(strings.ReplaceAll(numbers[1], ",", ""))
	room, _ := strconv.Atoi(strings.ReplaceAll(numbers[2], ",", ""))
	if room <= 0 || size <= room {
		t.Fatalf("reason %q: the file's %d tokens should exceed a positive room %d", got.str("reason"), size, room)
	}
	c.turn("still there?")
	if user := kbLastUser(kbRequestFor(t, llm, "still there?")); strings.Contains(user, `{"documents"`) {
		t.Fatalf("the refused file rode with the next message:\n%s", user)
	}
}

// TestKnowledgeAccess: the upload routes are behind the Origin and token
// checks of the rest of the API.
func TestKnowledgeAccess(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Hi.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	const token = "kb-token-for-the-tests"
	cfg.Server.AuthToken = token
	m := startKoe(t, cfg)
	conf := cfg.Character.ConfUID
	url := kbDocsURL(m.Addr(), conf)
	auth := "Authorization: Bearer " + token
	story := []kbPart{kbFilePart(t, "story.md", "text/markdown")}

	if status, a := kbUpload(t, url, story, auth, "Origin: http://evil.example"); status != 403 || !strings.Contains(a.Error, "allowed_origins") {
		t.Fatalf("cross-site upload: %d %q", status, a.Error)
	}
	if status, a := kbUpload(t, url, story); status != 401 || !strings.Contains(a.Error, "auth_token") {
		t.Fatalf("upload without the token: %d %q", status, a.Error)
	}
	if status, _ := kbUpload(t, url, story, "Authorization: Bearer wrong-token-wrong-token"); status != 401 {
		t.Fatalf("upload with a wrong token: %d", status)
	}
	uid := say(t, m.Addr(), "", "hello", auth)
	files := "http://" + m.Addr() + "/api/histories/" + conf + "/" + uid + "/files"
	if status, _ := kbUpload(t, files, story, auth, "Origin: http://evil.example"); status != 403 {
		t.Fatalf("cross-site attach: %d", status)
	}
	if status, _ := kbUpload(t, files, story); status != 401 {
		t.Fatalf("attach without the token: %d", status)
	}
	if status, _ := kbDo(t, "GET", url, "", nil); status != 401 {
		t.Fatalf("list without the token: %d", status)
	}
	if docs := kbList(t, m.Addr(), conf, auth); len(docs) != 0 {
		t.Fatalf("refused uploads were kept: %+v", docs)
	}
	// The same page origin and the token: taken.
	if status, a := kbUpload(t, url, story, auth, "Origin: http://"+m.Addr()); status != 201 || len(a.Added) != 1 {
		t.Fatalf("same-origin upload: %d %+v", status, a)
	}
	if status, a := kbUpload(t, files, story, auth); status != 201 || a.File.Name != "story.md" {
		t.Fatalf("attach with the token: %d %+v", status, a)
	}
	if status, _ := kbDo(t, "DELETE", url+"/whatever", "", nil, "Origin: http://evil.example", auth); status != 403 {
		t.Fatalf("cross-site delete: %d", status)
	}
}
