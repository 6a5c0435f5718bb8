package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"koe/app"
	"koe/config"
	"koe/internal/pdftext/pdftest"
	"koe/testkit/fakellm"
)

// TestKnowledgeHostileFiles: files made to cost far more to read than
// they weigh are refused with the status of their kind and a reason
// naming the key that bounds them, and nothing of them is kept.
func TestKnowledgeHostileFiles(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Noted.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Knowledge.MaxInflatedBytes = 4 << 20
	cfg.Knowledge.MaxDocumentTokens = 50_000
	m := startKoe(t, cfg)
	conf := cfg.Character.ConfUID
	url := kbDocsURL(m.Addr(), conf)
	filesURL := "http://" + m.Addr() + "/api/histories/" + conf + "/" + say(t, m.Addr(), "", "hello there") + "/files"

	hostile := []struct {
		name, file string
		data       []byte
		status     int
		kind, key  string
	}{
		{"pages sharing a stream that inflates to a megabyte", "shared.pdf", pdftest.InflatingPages(16, 1<<20, true), 413, "inflated", "knowledge.max_inflated_bytes"},
		{"a character map that inflates to 8 MB", "cmap.pdf", pdftest.InflatingCMap(8<<20, 1), 413, "inflated", "knowledge.max_inflated_bytes"},
		{"JSON that indents to 18 MB", "deep.json", []byte(strings.Repeat("[", 3000) + strings.Repeat("]", 3000)), 413, "inflated", "knowledge.max_inflated_bytes"},
		{"one word of 2 MB", "word.txt", bytes.Repeat([]byte("a"), 2<<20), 422, "too_long", "knowledge.max_document_tokens"},
	}
	for _, h := range hostile {
		status, a := kbUpload(t, url, []kbPart{{field: "file", filename: h.file, data: h.data}})
		if status != h.status || len(a.Refused) != 1 || a.Refused[0].Kind != h.kind || !strings.Contains(a.Error, h.key) {
			t.Fatalf("%s: %d %+v, want %d %s naming %s", h.name, status, a, h.status, h.kind, h.key)
		}
		status, a = kbUpload(t, filesURL, []kbPart{{field: "file", filename: h.file, data: h.data}})
		if status != h.status || !strings.Contains(a.Error, h.key) {
			t.Fatalf("%s attached: %d %+v", h.name, status, a)
		}
	}
	if docs := kbList(t, m.Addr(), conf); len(docs) != 0 {
		t.Fatalf("hostile files were kept: %+v", docs)
	}
}

// slowFile takes seconds to count (a long word of two letters, about 4
// bytes a token), far longer than a test takes to send a request.
func slowFile() kbPart {
	return kbPart{field: "file", filename: "slow.txt", mime: "text/plain", data: bytes.Repeat([]byte("ab"), 4<<20)}
}

// rawUpload sends an upload on a connection of its own, which the test
// may close to leave, and returns it.
func rawUpload(t *testing.T, addr, path string, parts ...kbPart) net.Conn {
	t.Helper()
	body, ctype := kbMultipart(t, parts...)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", path, ctype, len(body))
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// awaitStatus reads frames until a status frame in state whose content
// holds text.
func awaitStatus(c *client, state, text string) msg {
	c.t.Helper()
	for {
		m := kbAwait(c, "status")
		content, _ := m["content"].(map[string]any)
		if s, _ := content["state"].(string); s == state {
			if body, _ := content["content"].(string); strings.Contains(body, text) {
				return m
			}
		}
	}
}

// startSlowIngest starts koe, configured further by configure (nil: as
// it is), and an upload of slowFile on a connection of its own, and
// returns once koe says it is reading it: koe, the character, a session
// that hears koe's events, and the upload's connection.
func startSlowIngest(t *testing.T, configure func(*config.Config)) (*app.Main, string, *client, net.Conn) {
	t.Helper()
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Noted.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Knowledge.MaxDocumentTokens = 100_000_000
	cfg.Knowledge.IngestTimeout = time.Hour
	if configure != nil {
		configure(&cfg)
	}
	m := startKoe(t, cfg)
	conf := cfg.Character.ConfUID
	events := dialKoe(t, m.Addr())
	slow := rawUpload(t, m.Addr(), "/api/characters/"+conf+"/documents", slowFile())
	awaitStatus(events, "start", "Reading slow.txt")
	return m, conf, events, slow
}

// TestKnowledgeIngestLimitAndLeaving: while knowledge.max_concurrent_ingests
// files are being read, one more is refused with 503, Retry-After and the
// key; an uploader that leaves stops the reading of its file, which frees
// its place.
func TestKnowledgeIngestLimitAndLeaving(t *testing.T) {
	m, conf, events, slow := startSlowIngest(t, func(cfg *config.Config) { cfg.Knowledge.MaxConcurrentIngests = 1 })

	body, ctype := kbMultipart(t, kbFilePart(t, "story.md", "text/markdown"))
	req, _ := http.NewRequest("POST", kbDocsURL(m.Addr(), conf), bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var a kbAnswer
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_ = json.Unmarshal(data, &a)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || len(a.Refused) != 1 || a.Refused[0].Kind != "overloaded" ||
		!strings.Contains(a.Error, "knowledge.max_concurrent_ingests") {
		t.Fatalf("an upload while one is read: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), data)
	}

	// The slow file's uploader leaves: its reading stops, and says so.
	_ = slow.Close()
	awaitStatus(events, "error", "slow.txt")
	if status, a := kbUpload(t, kbDocsURL(m.Addr(), conf), []kbPart{kbFilePart(t, "story.md", "text/markdown")}); status != 201 || len(a.Added) != 1 {
		t.Fatalf("once the uploader left: %d %+v", status, a)
	}
	if docs := kbList(t, m.Addr(), conf); len(docs) != 1 {
		t.Fatalf("documents: %+v", docs)
	}
}

// TestKnowledgeShutdownDuringIngest: koe stopping while a file is read
// stops the reading, answers the uploader 503 with the reason, and stops
// cleanly within its shutdown timeout.
func TestKnowledgeShutdownDuringIngest(t *testing.T) {
	m, _, _, slow := startSlowIngest(t, nil)
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()

	_ = slow.SetReadDeadline(time.Now().Add(60 * time.Second)) // a hang guard
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatalf("no answer to the uploader: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(data), "koe is shutting down: slow.txt was not stored") {
		t.Fatalf("the uploader heard %d %s", resp.StatusCode, data)
	}
	if err := <-closed; err != nil {
		t.Fatalf("koe stopped with %v", err)
	}
}
