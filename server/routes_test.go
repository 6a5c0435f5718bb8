package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"koe/knowledge"
	"koe/protocol"
	"koe/server"
)

// What the REST routes make of their services' answers, on fakes (see
// fakes_test.go): the status of each kind of failure, the JSON shapes.

// want checks an answer's status and, if says is not empty, that its
// error says it.
func (a reply) want(t *testing.T, what string, status int, says string) {
	t.Helper()
	if a.status != status {
		t.Errorf("%s: status %d %q, want %d", what, a.status, a.body, status)
		return
	}
	if says != "" {
		if got := a.errorText(t); !strings.Contains(got, says) {
			t.Errorf("%s: error %q, want it to say %q", what, got, says)
		}
	}
}

func TestRoutesSessions(t *testing.T) {
	k := startFake(t)
	if a := k.do(t, "GET", "/api/sessions", nil); a.status != 200 || string(bytes.TrimSpace(a.body)) != "[]" {
		t.Fatalf("no sessions: %d %s, want an empty list", a.status, a.body)
	}
	k.sessions.Open(t.Context(), nil, server.SessionOptions{ClientUID: "desk"})
	k.sessions.next(t)
	var list []protocol.SessionInfo
	k.do(t, "GET", "/api/sessions", nil).json(t, &list)
	if want := []protocol.SessionInfo{{ClientUID: "desk", ConfUID: "mao", ConfName: "Mao", HistoryUID: "h-desk"}}; !reflect.DeepEqual(list, want) {
		t.Errorf("sessions = %+v, want %+v", list, want)
	}
	var st protocol.MemoryState
	k.do(t, "GET", "/api/sessions/desk/memory", nil).json(t, &st)
	if st.Type != protocol.TypeMemoryState || st.HistoryUID != "h-desk" {
		t.Errorf("memory = %+v", st)
	}
	for _, path := range []string{"/api/sessions/gone/memory", "/api/sessions/gone/context"} {
		k.do(t, "GET", path, nil).want(t, path, 404, "no open session with that client_uid")
	}
	k.do(t, "GET", "/api/sessions/desk/context", nil).want(t, "context before any call", 404, "no such thing here")

	rate := "/api/sessions/desk/compression-rate"
	k.do(t, "PUT", rate, []byte(`{"rate":0.2}`), "text/plain").want(t, "rate as text", 415, "Content-Type: application/json")
	k.do(t, "PUT", rate, []byte(`{"rate":`)).want(t, "broken JSON", 400, "invalid JSON body")
	k.do(t, "PUT", rate, map[string]any{}).want(t, "no rate", 400, `"rate" is missing`)
	k.do(t, "PUT", rate, map[string]any{"rate": 0.9}).want(t, "rate refused", 400, "that is not right")
	a := k.do(t, "PUT", rate, map[string]any{"rate": 0.2})
	a.json(t, &st)
	if a.status != 200 || st.CompressionRate != 0.2 {
		t.Fatalf("rate set: %d %s", a.status, a.body)
	}
	// The session's own client hears of the change.
	s := k.sessions.Find("desk").(*fakeSession)
	if told := <-s.notified; !reflect.DeepEqual(told, st) {
		t.Errorf("the session was told %+v, want %+v", told, st)
	}
}

func TestRoutesPrompts(t *testing.T) {
	k := startFake(t)
	const path = "/api/characters/mao/prompts/system"
	var body map[string]any
	k.do(t, "GET", path, nil).json(t, &body)
	if want := map[string]any{"conf_uid": "mao", "name": "system", "text": "the default system", "default": true}; !reflect.DeepEqual(body, want) {
		t.Errorf("GET = %v, want %v", body, want)
	}
	k.do(t, "PUT", path, map[string]any{}).want(t, "no text", 400, `"text" is missing`)
	a := k.do(t, "PUT", path, map[string]any{"text": "Be brief."})
	a.json(t, &body)
	if a.status != 200 || body["text"] != "Be brief." || body["default"] != false {
		t.Errorf("PUT = %d %v", a.status, body)
	}
	k.do(t, "GET", "/api/characters/nobody/prompts/system", nil).want(t, "unknown character", 404, "no such thing here")
}

func TestRoutesHistories(t *testing.T) {
	k := startFake(t)
	var list protocol.HistoryList
	k.do(t, "GET", "/api/histories/mao", nil).json(t, &list)
	if len(list.Histories) != 1 || list.Histories[0].UID != "h1" {
		t.Errorf("histories = %+v", list)
	}
	k.do(t, "GET", "/api/histories/nobody", nil).want(t, "unknown character", 404, "no such thing here")
	var chat protocol.ChatHistory
	k.do(t, "GET", "/api/histories/mao/h1", nil).json(t, &chat)
	if chat.HistoryUID != "h1" || len(chat.Messages) != 1 {
		t.Errorf("chat history = %+v", chat)
	}
	for _, q := range []string{"?before=x", "?before=-1", "?limit=many"} {
		k.do(t, "GET", "/api/histories/mao/h1/messages"+q, nil).want(t, q, 400, "must be")
		k.do(t, "GET", "/api/histories/mao/h1"+q, nil).want(t, q, 400, "must be")
	}
	var page protocol.HistoryPage
	k.do(t, "GET", "/api/histories/mao/h1/messages?before=5&limit=20", nil).json(t, &page)
	if page.Type != protocol.TypeHistoryPage || len(page.Messages) != 1 {
		t.Errorf("page = %+v", page)
	}
	if last := locked(&k.histories.mu, func() [2]uint64 { return k.histories.pages[len(k.histories.pages)-1] }); last != [2]uint64{5, 20} {
		t.Errorf("page asked for before, limit = %v, want 5, 20", last)
	}
	k.do(t, "GET", "/api/histories/mao/h2/messages", nil).want(t, "unknown history", 404, "no such thing here")

	a := k.do(t, "GET", "/api/histories/mao/h1/images/img1", nil)
	if a.status != 200 || a.header.Get("Content-Type") != "image/png" || string(a.body) != "\x89PNG fake" ||
		!strings.Contains(a.header.Get("Cache-Control"), "immutable") {
		t.Errorf("image: %d %v %q", a.status, a.header, a.body)
	}
	k.do(t, "GET", "/api/histories/mao/h1/images/img2", nil).want(t, "unknown image", 404, "")
}

func TestRoutesChat(t *testing.T) {
	k := startFake(t)
	var ai protocol.ChatMessage
	a := k.do(t, "POST", "/api/chat/invoke", protocol.ChatRequest{Message: "hi", ConfUID: "mao", HistoryUID: "h1"})
	a.json(t, &ai)
	if a.status != 200 || ai.Type != protocol.MessageAI || ai.Content != "echo hi" || ai.AdditionalKwargs.HistoryUID != "h1" {
		t.Errorf("invoke: %d %s", a.status, a.body)
	}
	if got := locked(&k.chats.mu, func() protocol.ChatRequest { return k.chats.asked[0] }); got.ConfUID != "mao" || got.HistoryUID != "h1" {
		t.Errorf("the chat was asked %+v", got)
	}
	k.do(t, "POST", "/api/chat/invoke", protocol.ChatRequest{Message: "fail"}).want(t, "refused chat", 404, "no such thing here")
	k.do(t, "POST", "/api/chat/invoke", []byte(`{"message":"hi"}`), "text/plain").want(t, "chat as text", 415, "")

	// The stream carries the turn's events, not its OLV frames, and ends
	// with end; stream_tokens: false leaves the tokens out.
	for _, tokens := range []bool{true, false} {
		a = k.do(t, "POST", "/api/chat/stream", protocol.ChatRequest{Message: "hi", StreamTokens: &tokens})
		if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("stream: %d %v", a.status, a.header)
		}
		var got []string
		sc := bufio.NewScanner(bytes.NewReader(a.body))
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev protocol.ChatEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			got = append(got, ev.Type)
		}
		want := []string{"message", "token", "token", "message", "end"}
		if !tokens {
			want = []string{"message", "message", "end"}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("stream_tokens %v: events %v, want %v", tokens, got, want)
		}
	}
	k.do(t, "POST", "/api/chat/stream", protocol.ChatRequest{Message: "fail"}).want(t, "refused stream", 404, "no such thing here")

	var stop protocol.StopResult
	a = k.do(t, "POST", "/api/chat/running/stop", nil)
	a.json(t, &stop)
	if a.status != 200 || stop != (protocol.StopResult{HistoryUID: "running", Stopped: true}) {
		t.Errorf("stop: %d %s", a.status, a.body)
	}
	k.do(t, "POST", "/api/chat/idle/stop", nil).want(t, "stop with no turn", 404, "no turn is running in that history")
}

// koe's own failures are told as such, without their details, which go
// to the log.
func TestRoutesInternalFailure(t *testing.T) {
	k := startFake(t)
	a := k.do(t, "POST", "/api/chat/invoke", protocol.ChatRequest{Message: "boom"})
	a.want(t, "internal", 500, "koe failed to do that; the reason is in its log")
	if strings.Contains(string(a.body), "disk on fire") {
		t.Errorf("the client was told koe's internals: %s", a.body)
	}
	if logs := k.logs.String(); !strings.Contains(logs, "http request failed") || !strings.Contains(logs, "disk on fire") {
		t.Errorf("the failure was not logged: %s", logs)
	}
	k.do(t, "POST", "/api/chat/stream", protocol.ChatRequest{Message: "boom"}).want(t, "internal stream", 500, "the reason is in its log")
}

// upload builds a multipart body of files, each a name and its text.
func upload(t *testing.T, files ...string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(files); i += 2 {
		part, err := w.CreateFormFile("file", files[i])
		if err != nil {
			t.Fatal(err)
		}
		_, _ = part.Write([]byte(files[i+1]))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), w.FormDataContentType()
}

func TestRoutesDocuments(t *testing.T) {
	k := startFake(t)
	const docs = "/api/characters/mao/documents"
	body, ctype := upload(t, "a.txt", "one two three", "b.pdf", "%PDF")
	var added struct {
		ConfUID string                `json:"conf_uid"`
		Added   []knowledge.Document  `json:"added"`
		Refused []knowledge.FileError `json:"refused"`
	}
	a := k.do(t, "POST", docs, body, ctype)
	a.json(t, &added)
	if a.status != 201 || len(added.Added) != 1 || added.Added[0].Name != "a.txt" || len(added.Refused) != 1 || added.Refused[0].Filename != "b.pdf" {
		t.Errorf("upload: %d %s", a.status, a.body)
	}
	body, ctype = upload(t, "c.pdf", "%PDF")
	k.do(t, "POST", docs, body, ctype).want(t, "every file refused", 415, "only text here")
	k.do(t, "POST", docs, []byte("x"), "text/plain").want(t, "not multipart", 415, "multipart/form-data")
	body, ctype = upload(t)
	k.do(t, "POST", docs, body, ctype).want(t, "no file part", 400, `no "file" part`)

	var list struct {
		Documents    []knowledge.Document `json:"documents"`
		Tokens       int                  `json:"tokens"`
		MaxFileBytes int                  `json:"max_file_bytes"`
	}
	k.do(t, "GET", docs, nil).json(t, &list)
	if len(list.Documents) != 1 || list.Tokens != 3 || list.MaxFileBytes != knowledge.DefaultMaxFileBytes {
		t.Errorf("list = %+v", list)
	}
	k.do(t, "GET", "/api/characters/nobody/documents", nil).want(t, "unknown character", 404, "")
	if a := k.do(t, "DELETE", docs+"/da.txt", nil); a.status != 200 || string(a.body) != `{"deleted":true}` {
		t.Errorf("delete: %d %s", a.status, a.body)
	}
	k.do(t, "DELETE", docs+"/da.txt", nil).want(t, "delete again", 404, "")

	var attached struct {
		HistoryUID string                `json:"history_uid"`
		File       protocol.AttachedFile `json:"file"`
	}
	body, ctype = upload(t, "notes.txt", "remember this")
	a = k.do(t, "POST", "/api/histories/mao/h1/files", body, ctype)
	a.json(t, &attached)
	if a.status != 201 || attached.HistoryUID != "h1" || attached.File.Name != "notes.txt" {
		t.Errorf("attach: %d %s", a.status, a.body)
	}
	k.do(t, "POST", "/api/histories/mao/llm-down/files", body, ctype).want(t, "attach, LLM down", 502, "the LLM server at http://llm.test/v1 failed")
	k.do(t, "POST", "/api/histories/mao/busy/files", body, ctype).want(t, "attach during a reply", 409, "busy: try again")
	body, ctype = upload(t, "a.txt", "1", "b.txt", "2")
	k.do(t, "POST", "/api/histories/mao/h1/files", body, ctype).want(t, "two files attached", 400, "attach one file per request")

	// A koe without a knowledge service says so.
	bare := startFake(t, func(o *server.Options) { o.Documents = nil })
	body, ctype = upload(t, "a.txt", "one")
	for _, r := range []struct {
		method string
		body   []byte
	}{{"GET", nil}, {"POST", body}, {"DELETE", nil}} {
		path := docs
		if r.method == "DELETE" {
			path += "/d1"
		}
		var a reply
		if r.body != nil {
			a = bare.do(t, r.method, path, r.body, ctype)
		} else {
			a = bare.do(t, r.method, path, nil)
		}
		a.want(t, r.method+" without documents", 502, "koe runs without files and documents")
	}
}

func TestRoutesMemories(t *testing.T) {
	k := startFake(t)
	const mem = "/api/characters/mao/memories"
	var r struct {
		Query string `json:"query"`
		Block string `json:"block"`
	}
	budget := func() *int { return locked(&k.memories.mu, func() *int { return k.memories.budget }) }
	a := k.do(t, "GET", mem+"?q=my+dog&budget=100", nil)
	a.json(t, &r)
	if b := budget(); a.status != 200 || r.Query != "my dog" || r.Block != "Biscuit" || b == nil || *b != 100 {
		t.Errorf("recall: %d %s (budget %v)", a.status, a.body, b)
	}
	k.do(t, "GET", mem+"?q=dog", nil)
	if b := budget(); b != nil {
		t.Errorf("no budget asked for became %d", *b)
	}
	k.do(t, "GET", mem+"?q=dog&budget=lots", nil).want(t, "budget not a number", 400, "budget must be a whole number")
	k.do(t, "GET", mem+"?q=dog&budget=10", nil).want(t, "budget refused", 400, "")
	k.do(t, "GET", mem+"?limit=x", nil).want(t, "limit not a number", 400, "limit must be a whole number")
	k.do(t, "GET", mem+"?limit=900", nil).want(t, "limit refused", 400, "")
	if a := k.do(t, "GET", mem+"?before=c1", nil); a.status != 200 || !strings.Contains(string(a.body), `"conf_uid":"mao"`) {
		t.Errorf("list: %d %s", a.status, a.body)
	}

	for _, c := range []struct {
		path   string
		status int
		body   string
	}{
		{mem + "/h1/7", 200, `{"forgotten":true}`},
		{mem + "/h1/8", 404, ""},
		{mem + "/h1/seven", 400, ""},
		{mem + "?history_uid=h1", 200, `{"count":3,"forgotten":true,"history_uid":"h1"}`},
		{mem + "?all=true", 200, `{"count":9,"forgotten":true}`},
		{mem + "?all=yes", 400, ""},
		{mem + "?all=true&history_uid=h1", 400, ""},
		{mem, 400, ""},
	} {
		a := k.do(t, "DELETE", c.path, nil)
		if a.status != c.status || c.body != "" && string(a.body) != c.body {
			t.Errorf("DELETE %s: %d %s, want %d %s", c.path, a.status, a.body, c.status, c.body)
		}
	}
	want := []string{"recall mao my dog", "recall mao dog", "recall mao dog", "list mao ", "list mao c1",
		"forget mao h1", "forget mao h1", "forget history mao h1", "forget all mao"}
	if asked := locked(&k.memories.mu, func() []string { return slices.Clone(k.memories.asked) }); !reflect.DeepEqual(asked, want) {
		t.Errorf("memories were asked %q, want %q", asked, want)
	}

	// A koe without long-term memory says so.
	bare := startFake(t, func(o *server.Options) { o.Memories = nil })
	for _, c := range []struct{ method, path string }{
		{"GET", mem}, {"GET", mem + "?q=anything"}, {"DELETE", mem + "?all=true"}, {"DELETE", mem + "/h/1"},
	} {
		bare.do(t, c.method, c.path, nil).want(t, c.method+" "+c.path+" without recall", 503, "without long-term memory")
	}
}

func TestRoutesOverlay(t *testing.T) {
	k := startFake(t)
	a := k.do(t, "GET", "/api/characters/default/overlay", nil)
	var v protocol.OverlayView
	a.json(t, &v)
	if a.status != 200 || v.ConfUID != "mao" || a.header.Get("Cache-Control") != "no-store" || !strings.Contains(string(a.body), `"avatar":null`) {
		t.Errorf("overlay: %d %v %s", a.status, a.header, a.body)
	}
	k.do(t, "GET", "/api/characters/nobody/overlay", nil).want(t, "unknown character", 404, "")
}

func TestRoutesLive(t *testing.T) {
	k := startFake(t)
	for _, c := range []struct {
		method, path string
		paused       bool
	}{{"GET", "/api/live", false}, {"POST", "/api/live/pause", true}, {"POST", "/api/live/resume", false}} {
		var st struct{ Paused bool }
		a := k.do(t, c.method, c.path, nil)
		a.json(t, &st)
		if a.status != 200 || st.Paused != c.paused {
			t.Errorf("%s: %d %s", c.path, a.status, a.body)
		}
	}
	var skip struct {
		Skipped bool           `json:"skipped"`
		Status  map[string]any `json:"status"`
	}
	a := k.do(t, "POST", "/api/live/skip", nil)
	if a.json(t, &skip); !skip.Skipped || skip.Status == nil {
		t.Errorf("skip: %d %s", a.status, a.body)
	}
	locked(&k.live.mu, func() bool { k.live.down = true; return true })
	k.do(t, "GET", "/api/live", nil).want(t, "leader away", 503, "the leading instance does not answer")

	off := startFake(t, func(o *server.Options) { o.LiveChat = nil })
	off.do(t, "GET", "/api/live", nil).want(t, "live chat off", 404, "live chat is off")
}

// An unknown API route is answered as one; routes take only their method.
func TestRoutesUnknown(t *testing.T) {
	k := startFake(t)
	k.do(t, "GET", "/api/nothing", nil).want(t, "unknown route", http.StatusNotFound, "")
	k.do(t, "DELETE", "/api/sessions", nil).want(t, "wrong method", http.StatusMethodNotAllowed, "")
}
