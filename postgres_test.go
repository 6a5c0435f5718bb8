package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"koe/history"
	"koe/internal/fakellm"
)

// koe with store: postgres keeps histories in PostgreSQL: a conversation
// started on one koe continues on another (its own data_dir) sharing the
// database, and both turns are stored in one history.
func TestPostgresStoreAcrossInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts koe in child processes")
	}
	dsn := os.Getenv("KOE_TEST_PG_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("KOE_TEST_PG_DSN is not set: the postgres store is not tested (scripts/test.sh starts a server)")
		}
		t.Skip("KOE_TEST_PG_DSN is not set: postgres store not tested (scripts/test.sh starts a server)")
	}
	dsn = testSchema(t, dsn)
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

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := history.OpenPostgres(ctx, dsn, history.PGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	records, err := store.Messages("koe_default", uid)
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
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/client-ws", nil)
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

// testSchema creates a schema of the test's own, dropped at its end, and
// returns a DSN whose connections use it.
func testSchema(t *testing.T, dsn string) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "koe_test_" + hex.EncodeToString(b[:])
	exec := func(sql string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE SCHEMA " + schema)
	t.Cleanup(func() { exec("DROP SCHEMA " + schema + " CASCADE") })
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema
	}
	return dsn + sep + "search_path=" + schema
}
