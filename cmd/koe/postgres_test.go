package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/postgres"
	"koe/testkit/fakellm"
	"koe/testkit/pgtest"
)

// koe with store: postgres keeps its data in PostgreSQL: a conversation
// started on one koe continues on another (its own data_dir) sharing the
// database, both turns are stored in one history, and a document given to
// one is listed by another.
func TestPostgresStoreAcrossInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts koe in child processes")
	}
	dsn := pgtest.Schema(t)
	llm, err := fakellm.Start("127.0.0.1:0", fakellm.Echo(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llm.Close() })
	llm.SetRecording(false)
	instance := func(name string) *koeProcess {
		dir := filepath.Join(t.TempDir(), name)
		conf := filepath.Join(dir, "conf.yaml")
		yaml := fmt.Sprintf("data_dir: %s\ncharacters_dir: %s\nlog_level: info\nstore: postgres\nserver:\n  backgrounds_dir: %s\ncharacter:\n  llm:\n    base_url: %s\n    model: %s\n  tts:\n    engine: none\n",
			filepath.Join(dir, "data"), filepath.Join(dir, "characters"), filepath.Join(dir, "bg"), llm.URL(), fakellm.ModelID)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		// The DSN comes from the environment, as operators give it.
		t.Setenv("KOE_DATABASE_URL", dsn)
		return startKoeProcess(t, conf)
	}
	a, b := instance("a"), instance("b")

	uid := turn(t, a.addr, "", "", "hello from the first koe")
	if got := turn(t, b.addr, uid, "hello from the first koe", "hello from the second koe"); got != uid {
		t.Fatalf("the second koe answered in history %q, want %q", got, uid)
	}

	// A document given to one koe is the character's on the other.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("file", "handbook.md")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = part.Write([]byte("# Handbook\n\nThe shared handbook says hello to every instance.\n"))
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+a.addr+"/api/characters/koe_default/documents", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload to the first koe: %s", resp.Status)
	}
	// (A koe caches a character's document list: one started after the
	// upload reads it from the database.)
	c := instance("c")
	resp, err = http.Get("http://" + c.addr + "/api/characters/koe_default/documents")
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(listed), "handbook.md") {
		t.Fatalf("documents on the third koe: %s %s", resp.Status, listed)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	records, err := store.Messages(ctx, "koe_default", uid)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"hello from the first koe", "hello from the second koe"} {
		if !answered(records, text) {
			t.Fatalf("%q is not stored with its reply: %+v", text, records)
		}
	}
}

// turn runs one text turn on koe at addr, in history uid ("": a new one,
// else one that must hold the message said), and returns the history's uid.
func turn(t *testing.T, addr, uid, said, text string) string {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(wsURL(addr)+"/client-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	send := func(v map[string]any) {
		data, _ := json.Marshal(v)
		if err := ws.WriteMessage(websocket.TextMessage, data); err != nil {
			t.Fatal(err)
		}
	}
	until := func(typ, text string) map[string]any {
		for {
			_ = ws.SetReadDeadline(time.Now().Add(2 * time.Minute))
			_, data, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("waiting for %s %s: %v", typ, text, err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			if m["type"] == typ && (text == "" || m["text"] == text) {
				return m
			}
		}
	}
	if uid == "" {
		send(map[string]any{"type": "create-new-history"})
		uid, _ = until("new-history-created", "")["history_uid"].(string)
	} else {
		send(map[string]any{"type": "fetch-and-set-history", "history_uid": uid})
		if m := until("history-data", ""); !strings.Contains(fmt.Sprint(m["messages"]), said) {
			t.Fatalf("history-data of %s lacks %q: %v", uid, said, m)
		}
	}
	send(map[string]any{"type": "text-input", "text": text})
	until("backend-synth-complete", "")
	send(map[string]any{"type": "frontend-playback-complete"})
	until("control", "conversation-chain-end")
	return uid
}
