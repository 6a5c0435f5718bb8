package server_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe"
	"koe/app"
	"koe/bolt"
	"koe/testkit"
	"koe/testkit/fakellm"
)

const greeting = "Hi! I am Koe. Nice to meet you, friend."

func TestConnectSequence(t *testing.T) {
	llm := startLLM(t, nil)
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))

	first := dial(t, m.Addr(), nil)
	var got []msg
	for i := 0; i < 5; i++ {
		got = append(got, first.next())
	}
	want := []string{"group-update", "full-text", "set-model-and-conf", "group-update", "control:start-mic"}
	if !slices.Equal(types(got), want) {
		t.Fatalf("connect sequence = %v, want %v", types(got), want)
	}
	if got[1].str("text") != "Connection established" {
		t.Errorf("full-text = %q", got[1].str("text"))
	}
	conf := got[2]
	if conf.str("conf_uid") == "" || conf.str("conf_name") == "" || conf.str("client_uid") == "" {
		t.Errorf("set-model-and-conf lacks ids: %v", conf)
	}
	info, _ := conf["model_info"].(map[string]any)
	if url, _ := info["url"].(string); !strings.HasPrefix(url, "/live2d-models/") {
		t.Errorf("model_info.url = %v, want a relative /live2d-models/ URL", info["url"])
	}
	if members, ok := got[0]["members"].([]any); !ok || len(members) != 0 || got[0]["is_owner"] != false {
		t.Errorf("group-update = %v", got[0])
	}

	second := dial(t, m.Addr(), nil)
	second.next()
	second.next()
	if uid := second.next().str("client_uid"); uid == conf.str("client_uid") {
		t.Errorf("two connections share client_uid %q", uid)
	}
}

// TestSpokenTurnTrace records a whole session as the OLV web client drives
// it and compares it with the golden trace.
func TestSpokenTurnTrace(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(greeting)}))
	m := startKoe(t, withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm))
	c := dial(t, m.Addr(), nil)
	c.tr = true
	for i := 0; i < 5; i++ {
		c.next()
	}
	// The web client's start-up requests, then one typed turn.
	for _, typ := range []string{"fetch-backgrounds", "fetch-configs", "fetch-history-list", "create-new-history"} {
		c.send(msg{"type": typ})
		c.next()
	}
	c.send(msg{"type": "text-input", "text": "Hello there", "images": []any{}})
	c.until(isType("backend-synth-complete"))
	// The OLV client sends playback-complete several times per turn.
	for i := 0; i < 3; i++ {
		c.send(msg{"type": "frontend-playback-complete"})
	}
	c.until(isControl("conversation-chain-end"))
	c.silent() // exactly one chain-end
	c.request(msg{"type": "fetch-history-list"}, "history-list")

	// A stock OLV client gets the OLV message set only: no token frames
	// (koe's own clients ask for them, see TestKoeEventsOnlyForKoeClients).
	golden(t, "spoken_turn.jsonl", normalise(c.trace))

	// The pieces' display text reads back as the reply, spaces included.
	var display strings.Builder
	for _, line := range c.trace {
		if strings.Contains(line, `"type":"audio"`) {
			var m msg
			_ = jsonUnmarshal(strings.TrimPrefix(line, "< "), &m)
			dt, _ := m["display_text"].(map[string]any)
			display.WriteString(dt["text"].(string))
		}
	}
	if display.String() != greeting {
		t.Errorf("display pieces join to %q, want %q", display.String(), greeting)
	}
	reqs := llm.Requests()
	if len(reqs) != 1 || !reqs[0].Stream || reqs[0].Model != fakellm.ModelID {
		t.Fatalf("LLM requests = %+v", reqs)
	}
	last := reqs[0].Messages[len(reqs[0].Messages)-1]
	// The persona rides in the latest user message, right above its text
	// (roles alternate, as strict chat templates require).
	persona := testConfig(t, "", "").Character.Persona
	if reqs[0].Messages[0].Role != "system" || last.Role != "user" || last.Content != persona+"\n\nHello there" {
		t.Errorf("LLM got %s", contentOf(reqs[0]))
	}
}

func TestHistoryMessages(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	c := dialGreeted(t, m.Addr())

	if got := c.request(msg{"type": "fetch-history-list"}, "history-list"); len(got["histories"].([]any)) != 0 {
		t.Fatalf("fresh server lists histories: %v", got)
	}
	uid := c.request(msg{"type": "create-new-history"}, "new-history-created").str("history_uid")
	if !koe.ValidID(uid) {
		t.Fatalf("new history uid %q", uid)
	}
	// An empty history is not listed.
	if got := c.request(msg{"type": "fetch-history-list"}, "history-list"); len(got["histories"].([]any)) != 0 {
		t.Fatalf("empty history listed: %v", got)
	}
	c.turn("first words")

	list := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)
	if len(list) != 1 {
		t.Fatalf("history-list = %v", list)
	}
	entry := list[0].(map[string]any)
	latest := entry["latest_message"].(map[string]any)
	if entry["uid"] != uid || latest["role"] != "ai" || latest["content"] != "You said: first words." || entry["timestamp"] == "" {
		t.Fatalf("history entry = %v", entry)
	}

	// Switch away and back: history-data holds the turn, no metadata.
	other := c.request(msg{"type": "create-new-history"}, "new-history-created").str("history_uid")
	if other == uid {
		t.Fatal("create-new-history reused the uid")
	}
	data := c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")
	records := data["messages"].([]any)
	if len(records) != 2 {
		t.Fatalf("history-data = %v", data)
	}
	human, ai := records[0].(map[string]any), records[1].(map[string]any)
	if human["role"] != "human" || human["content"] != "first words" || ai["role"] != "ai" || ai["name"] != "Koe" {
		t.Fatalf("history-data records = %v", records)
	}
	// Memory was rebuilt from it: the next request carries the old turn.
	c.turn("second words")
	reqs := chatRequests(llm)
	ctx := contentOf(reqs[len(reqs)-1])
	// The old turn, then the persona right above the new user message.
	persona := testConfig(t, "", "").Character.Persona
	if !strings.Contains(ctx, "user: first words\nassistant: You said: first words.\nuser: "+persona+"\n\nsecond words\n") {
		t.Fatalf("context after fetch-and-set-history:\n%s", ctx)
	}

	del := c.request(msg{"type": "delete-history", "history_uid": uid}, "history-deleted")
	if del["success"] != true || del["history_uid"] != uid {
		t.Fatalf("history-deleted = %v", del)
	}
	if got := c.request(msg{"type": "fetch-history-list"}, "history-list"); len(got["histories"].([]any)) != 0 {
		t.Fatalf("deleted history still listed: %v", got)
	}
	c.expectError(msg{"type": "fetch-and-set-history", "history_uid": uid}, "no such history")
	if del := c.request(msg{"type": "delete-history", "history_uid": uid}, "history-deleted"); del["success"] != false {
		t.Fatalf("deleting twice = %v", del)
	}
}

func TestPersistenceAcrossRestart(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	dir := t.TempDir()
	cfg := testConfig(t, dir, llm.URL())

	first := startKoe(t, cfg)
	c := dialGreeted(t, first.Addr())
	c.turn("remember the blue door")
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"].(string)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := startKoe(t, cfg)
	c = dialGreeted(t, second.Addr())
	list := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["uid"] != uid {
		t.Fatalf("after restart history-list = %v", list)
	}
	c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")
	c.turn("what did I say?")
	reqs := chatRequests(llm)
	if ctx := contentOf(reqs[len(reqs)-1]); !strings.Contains(ctx, "user: remember the blue door\nassistant: You said: remember the blue door.") {
		t.Fatalf("memory not rebuilt after restart:\n%s", ctx)
	}
}

func TestInterruptMidStream(t *testing.T) {
	long := strings.Repeat("word ", 200) + "end."
	llm := startLLM(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words(long), Interval: 20 * time.Millisecond},
		fakellm.Reply{Tokens: fakellm.Words("Sorry, go ahead.")},
	))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	c := dialKoe(t, m.Addr())

	c.send(msg{"type": "text-input", "text": "talk a lot", "images": []any{}})
	tokens := 0
	c.until(func(m msg) bool {
		if m.typ() == "token" {
			tokens++
		}
		return tokens == 3
	})
	c.send(msg{"type": "interrupt-signal", "text": "word word"})
	select {
	case <-llm.Disconnects():
	case <-time.After(30 * time.Second):
		t.Fatal("the LLM stream was not closed by the interrupt")
	}
	// Frames already on the wire may still arrive before the ack; none of
	// the cancelled turn may follow it, chain-end included.
	c.send(msg{"type": "heartbeat"})
	for _, f := range c.until(isType("heartbeat-ack")) {
		if f.typ() != "token" && f.typ() != "audio" && f.typ() != "heartbeat-ack" && f.typ() != "message" {
			t.Fatalf("unexpected frame after interrupt: %v", f)
		}
	}
	c.silent()

	// History and memory keep only the heard text, marked interrupted.
	c.turn("sorry, go on")
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"].(string)
	records := c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")["messages"].([]any)
	heard := records[1].(map[string]any)
	if heard["content"] != "word word" || heard["interrupted"] != true {
		t.Fatalf("interrupted reply stored as %v", heard)
	}
	reqs := chatRequests(llm)
	ctx := contentOf(reqs[len(reqs)-1])
	if !strings.Contains(ctx, "assistant: word word\nuser: The user interrupted") || strings.Contains(ctx, "...") {
		t.Fatalf("context after interrupt:\n%s", ctx)
	}
}

func TestNewInputCancelsRunningTurn(t *testing.T) {
	llm := startLLM(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("slow ", 100)), Interval: 20 * time.Millisecond},
		fakellm.Reply{Tokens: fakellm.Words("Fast answer.")},
	))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	c := dialKoe(t, m.Addr())
	c.send(msg{"type": "text-input", "text": "one", "images": []any{}})
	c.until(isType("token"))
	got := c.turn("two")
	select {
	case <-llm.Disconnects():
	case <-time.After(30 * time.Second):
		t.Fatal("the first stream was not cancelled")
	}
	// Exactly one chain-end: the first turn ended silently.
	ends := 0
	for _, f := range got {
		if isControl("conversation-chain-end")(f) {
			ends++
		}
	}
	if ends != 1 {
		t.Fatalf("%d chain-ends in %v", ends, types(got))
	}
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"].(string)
	records := c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")["messages"].([]any)
	var roles []string
	for _, r := range records {
		rec := r.(map[string]any)
		roles = append(roles, fmt.Sprintf("%v %v", rec["role"], rec["interrupted"] == true))
	}
	if want := []string{"human false", "ai true", "human false", "ai false"}; !slices.Equal(roles, want) {
		t.Fatalf("records = %v, want %v", roles, want)
	}
}

func TestLLMFailuresKeepSessionUsable(t *testing.T) {
	t.Run("500", func(t *testing.T) {
		llm := startLLM(t, fakellm.Script(
			fakellm.Reply{Status: 500, ErrorMessage: "model crashed"},
			fakellm.Reply{Tokens: fakellm.Words("Back again.")},
		))
		m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
		c := dialGreeted(t, m.Addr())
		c.send(msg{"type": "text-input", "text": "hi", "images": []any{}})
		got := c.until(isControl("conversation-chain-end"))
		errFrame := got[len(got)-3]
		if errFrame.typ() != "error" || !strings.Contains(errFrame.str("message"), "HTTP 500") || !strings.Contains(errFrame.str("message"), llm.URL()) {
			t.Fatalf("frames = %v", got)
		}
		c.turn("again")
	})
	t.Run("down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		cfg := testConfig(t, t.TempDir(), "http://"+addr+"/v1")
		m := startKoe(t, cfg)
		c := dialGreeted(t, m.Addr())
		c.send(msg{"type": "text-input", "text": "hi", "images": []any{}})
		got := c.until(isControl("conversation-chain-end"))
		errFrame := got[len(got)-3]
		if errFrame.typ() != "error" || !strings.Contains(errFrame.str("message"), addr) || !strings.Contains(errFrame.str("message"), "OPENAI_BASE_URL") {
			t.Fatalf("frames = %v", got)
		}
		// The LLM comes up; the same session now gets answers.
		llm, err := fakellm.Start(addr, fakellm.Echo(0))
		if err != nil {
			t.Skipf("port %s was taken meanwhile: %v", addr, err)
		}
		t.Cleanup(func() { _ = llm.Close() })
		c.turn("now?")
	})
	t.Run("broken stream", func(t *testing.T) {
		llm := startLLM(t, fakellm.Script(
			fakellm.Reply{Tokens: fakellm.Words("Half of a sentence that never"), BreakAfter: 3},
			fakellm.Reply{Tokens: fakellm.Words("Whole.")},
		))
		m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
		c := dialGreeted(t, m.Addr())
		c.send(msg{"type": "text-input", "text": "hi", "images": []any{}})
		got := c.until(isControl("conversation-chain-end"))
		if !slices.Contains(types(got), "error") {
			t.Fatalf("frames = %v", types(got))
		}
		c.turn("again")
	})
}

func TestBadInputKeepsConnection(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.MaxMessageBytes = 64 << 10
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())

	c.expectError([]byte(`{"type":`), "invalid message")
	c.expectError([]byte(`[1,2,3]`), "invalid message")
	c.expectError([]byte(`{"text":"no type"}`), `no "type"`)
	c.expectError(msg{"type": "text-input", "text": 42}, "invalid message")
	c.expectError(msg{"type": "no-such-thing"}, "unknown message type")
	c.expectError(msg{"type": "text-input", "text": "   "}, "empty input")
	c.expectError([]byte(`{"type":"text-input","text":"`+strings.Repeat("a", 100<<10)+`"}`), "over the limit")
	for _, bad := range []string{"../../etc/passwd", "", strings.Repeat("x", 500), "a/b", "nul\x00"} {
		c.expectError(msg{"type": "fetch-and-set-history", "history_uid": bad}, "not valid")
		c.expectError(msg{"type": "delete-history", "history_uid": bad}, "not valid")
	}
	c.expectError(msg{"type": "switch-config", "file": "../conf.yaml"}, "not a character file")
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if m := c.next(); m.typ() != "error" {
		t.Fatalf("binary frame answered with %v", m)
	}
	c.alive()
	c.turn("still here?")

	// Far over the limit the connection is closed (1009), but the server
	// and other sessions carry on.
	other := dialGreeted(t, m.Addr())
	_ = c.ws.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("x"), 5*cfg.Server.MaxMessageBytes))
	if _, err := c.read(5 * time.Second); !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("huge frame: got %v, want close 1009", err)
	}
	other.alive()
	other.turn("and you?")
}

func TestSessionsKeepSeparateMemory(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(5*time.Millisecond))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	names := []string{"Alice", "Bob", "Carol", "Dave"}
	var wg sync.WaitGroup
	for _, name := range names {
		c := dialGreeted(t, m.Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.turn("my name is " + name)
			c.turn("who am I? " + name)
		}()
	}
	wg.Wait()
	for _, r := range llm.Requests() {
		last := r.Messages[len(r.Messages)-1].Content
		if !strings.HasPrefix(last, "who am I?") {
			continue
		}
		me := strings.TrimPrefix(last, "who am I? ")
		ctx := contentOf(r)
		for _, other := range names {
			if other != me && strings.Contains(ctx, other) {
				t.Fatalf("%s's context mentions %s:\n%s", me, other, ctx)
			}
		}
		if !strings.Contains(ctx, "user: my name is "+me+"\nassistant: You said: my name is "+me+".") {
			t.Fatalf("%s's context lacks its first turn:\n%s", me, ctx)
		}
	}
}

func TestShutdownPersistsRunningTurn(t *testing.T) {
	ctx := t.Context()
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("long ", 500)), Interval: 10 * time.Millisecond}))
	dir := t.TempDir()
	cfg := testConfig(t, dir, llm.URL())
	m := startKoe(t, cfg)
	c := dialKoe(t, m.Addr())
	c.send(msg{"type": "text-input", "text": "keep talking", "images": []any{}})
	c.until(isType("token"))
	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for {
		_, err := c.read(5 * time.Second)
		if err == nil {
			continue
		}
		if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Fatalf("client saw %v, want close 1001 (going away)", err)
		}
		break
	}
	store, err := bolt.Open(filepath.Join(dir, app.DatabaseFile), bolt.Options{})
	if err != nil {
		t.Fatalf("database not released: %v", err)
	}
	defer store.Close()
	list, err := store.List(ctx, cfg.Character.ConfUID)
	if err != nil || len(list) != 1 {
		t.Fatalf("list = %v, %v", list, err)
	}
	latest := list[0].LatestMessage
	if latest.Role != koe.RoleAI || !latest.Interrupted || !strings.HasPrefix(latest.Content, "long") {
		t.Fatalf("partial reply stored as %+v", latest)
	}
}

func TestSecondKoeOnSameDataDirFails(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	startKoe(t, cfg)
	second := &app.Main{Config: cfg, Logger: testLogger(t)}
	start := time.Now()
	err := second.Open()
	if !errors.Is(err, bolt.ErrLocked) {
		_ = second.Close()
		t.Fatalf("second koe: %v, want ErrLocked", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("took %s to fail", time.Since(start))
	}
}

func TestOriginAllowlist(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AllowedOrigins = []string{"https://vtuber.example.org"}
	m := startKoe(t, cfg)
	_, port, _ := net.SplitHostPort(m.Addr())
	for origin, ok := range map[string]bool{
		"":                                      true,
		"http://localhost:3000":                 true,
		"http://127.0.0.1:5173":                 true,
		"http://" + m.Addr():                    true,
		"https://vtuber.example.org":            true,
		"http://evil.example":                   false,
		"http://localhost.evil.example:" + port: false,
		"null":                                  false,
	} {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		ws, resp, err := websocket.DefaultDialer.Dial("ws://"+m.Addr()+"/client-ws", h)
		if ok && err != nil {
			t.Errorf("origin %q refused: %v", origin, err)
		}
		if !ok && (err == nil || resp == nil || resp.StatusCode != http.StatusForbidden) {
			t.Errorf("origin %q allowed (err %v)", origin, err)
		}
		if ws != nil {
			_ = ws.Close()
		}
	}
}

func TestSwitchConfig(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	if err := os.MkdirAll(cfg.CharactersDir, 0o755); err != nil {
		t.Fatal(err)
	}
	alice := "conf_name: alice\nconf_uid: alice_uid\ncharacter_name: Alice\npersona_prompt: You are Alice, a pirate.\n"
	if err := os.WriteFile(filepath.Join(cfg.CharactersDir, "alice.yaml"), []byte(alice), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	configs := c.request(msg{"type": "fetch-configs"}, "config-files")["configs"].([]any)
	if len(configs) != 2 || configs[1].(map[string]any)["filename"] != "alice.yaml" || configs[1].(map[string]any)["name"] != "alice" {
		t.Fatalf("config-files = %v", configs)
	}
	c.send(msg{"type": "switch-config", "file": "alice.yaml"})
	conf, switched := c.next(), c.next()
	if conf.typ() != "set-model-and-conf" || conf.str("conf_uid") != "alice_uid" || switched.typ() != "config-switched" {
		t.Fatalf("switch-config answered %v then %v", conf, switched)
	}
	got := c.turn("ahoy")
	for _, f := range got {
		if f.typ() == "audio" && f["display_text"].(map[string]any)["name"] != "Alice" {
			t.Fatalf("audio from %v", f["display_text"])
		}
	}
	reqs := chatRequests(llm)
	last := reqs[len(reqs)-1].Messages
	if sys := last[0]; sys.Role != "system" || !strings.HasPrefix(sys.Content, "You are Alice, talking with Human") {
		t.Fatalf("system prompt after switch = %+v", sys)
	}
	if p := last[len(last)-1]; p.Role != "user" || p.Content != "You are Alice, a pirate.\n\nahoy" {
		t.Fatalf("persona above the latest user text = %+v", p)
	}
	// Alice's histories are hers alone.
	list := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)
	c.request(msg{"type": "switch-config", "file": "conf.yaml"}, "config-switched")
	if len(list) != 1 || len(c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)) != 0 {
		t.Fatal("histories are not kept per character")
	}
	c.expectError(msg{"type": "switch-config", "file": "bob.yaml"}, "no character file")
}

func TestHTTPRoutes(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AvatarsDir = t.TempDir()
	cfg.Server.BackgroundsDir = t.TempDir()
	for _, f := range []struct {
		dir, name string
		data      []byte
	}{
		{cfg.Server.AvatarsDir, "a.png", pngBytes(t)},
		{cfg.Server.AvatarsDir, "evil.html", []byte("data")},
		{cfg.Server.BackgroundsDir, "room.jpeg", jpegBytes(t)},
		{cfg.Server.BackgroundsDir, "notes.txt", []byte("data")},
	} {
		if err := os.WriteFile(filepath.Join(f.dir, f.name), f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := startKoe(t, cfg)
	base := "http://" + m.Addr()
	for path, want := range map[string]int{
		"/healthz":           200,
		"/":                  200,
		"/koe.js":            200,
		"/avatars/a.png":     200,
		"/avatars/evil.html": 404,
		"/bg/room.jpeg":      200,
		"/client-ws":         426,
		"/live2d-models/x":   404,
	} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Origin", "http://elsewhere.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
		if strings.HasPrefix(path, "/avatars/a") || strings.HasPrefix(path, "/bg/") {
			if resp.Header.Get("Access-Control-Allow-Origin") == "" {
				t.Errorf("GET %s has no CORS header", path)
			}
		}
	}
	c := dialGreeted(t, m.Addr())
	files := c.request(msg{"type": "fetch-backgrounds"}, "background-files")["files"].([]any)
	if len(files) != 1 || files[0] != "room.jpeg" {
		t.Fatalf("background-files = %v", files)
	}
}

// A client that stops reading is dropped once its queue fills; the server
// stops its turn and everyone else carries on.
func TestSlowClientIsDropped(t *testing.T) {
	big := strings.Repeat("x", 4096) + " "
	tokens := make([]string, 100000) // 400 MB if ever read whole: far more than socket buffers hold
	for i := range tokens {
		tokens[i] = big // one string shared: the test itself stays small
	}
	llm := startLLM(t, func(r fakellm.Request) fakellm.Reply {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "flood") {
			return fakellm.Reply{Tokens: tokens}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Fine here.")}
	})
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.SendQueueSize = 16
	cfg.Server.WriteTimeout = time.Second
	// Each 4 KB delta counts as about a thousand tokens: allow the flood,
	// so that the queue, not the reply cap, ends it.
	cfg.Character.LLM.MaxReplyTokens = 1 << 30
	// Text only: with speech on, synthesis paces the reply and the queue
	// fills only as fast as espeak-ng speaks, which on a loaded machine
	// takes minutes.
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)

	// A koe client: token frames fill its queue fastest.
	slowDialer := *websocket.DefaultDialer
	slowDialer.Subprotocols = []string{"koe.v1"}
	slow, _, err := slowDialer.Dial("ws://"+m.Addr()+"/client-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if err := slow.WriteMessage(websocket.TextMessage, []byte(`{"type":"text-input","text":"flood me"}`)); err != nil {
		t.Fatal(err)
	}
	// The slow client reads nothing while its queue fills and koe drops it.
	select {
	case <-llm.Disconnects():
	case <-time.After(2 * time.Minute): // a guard against hanging, not a speed check
		t.Fatal("the slow client's turn was not stopped")
	}
	healthy := dialGreeted(t, m.Addr())
	healthy.turn("hello")

	_ = slow.SetReadDeadline(time.Now().Add(2 * time.Minute))
	for {
		if _, _, err := slow.ReadMessage(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the slow client was never disconnected")
			}
			break
		}
	}
	// Counted before it was disconnected.
	got := scrape(t, m.Addr(), nil)
	got.want(t, 1, "koe_queue_drops_total", "queue", "websocket")
	got.want(t, 1, "koe_turns_ended_total", "outcome", "completed")
}

// The OLV client creates a history on every connect; one never used is
// removed when its connection leaves instead of piling up.
func TestUnusedHistoryRemovedOnDisconnect(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	talker := dialGreeted(t, m.Addr())
	used := talker.request(msg{"type": "create-new-history"}, "new-history-created").str("history_uid")
	talker.turn("keep this one")
	_ = talker.ws.Close()
	idle := dialGreeted(t, m.Addr())
	unused := idle.request(msg{"type": "create-new-history"}, "new-history-created").str("history_uid")

	second := dialGreeted(t, m.Addr())
	// Still there while its connection is open.
	second.request(msg{"type": "fetch-and-set-history", "history_uid": unused}, "history-data")
	_ = idle.ws.Close()
	testkit.Await(t, "the unused history "+unused+" is gone", func() (msg, bool) {
		second.send(msg{"type": "fetch-and-set-history", "history_uid": unused})
		got := second.next()
		return got, got.typ() == "error"
	})
	if got := second.request(msg{"type": "fetch-and-set-history", "history_uid": used}, "history-data"); len(got["messages"].([]any)) != 2 {
		t.Fatalf("used history = %v", got)
	}
}

// Reloading the current history mid-turn stops the turn first, and what the
// turn stored on the way out is part of the reloaded history and memory.
func TestReloadCurrentHistoryMidTurn(t *testing.T) {
	llm := startLLM(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("busy ", 300)), Interval: 10 * time.Millisecond},
		fakellm.Echo(0)(fakellm.Request{Messages: []fakellm.Message{{Content: "next"}}}),
	))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	c := dialKoe(t, m.Addr())
	uid := c.request(msg{"type": "create-new-history"}, "new-history-created").str("history_uid")
	c.send(msg{"type": "text-input", "text": "start", "images": []any{}})
	c.until(isType("token"))
	records := c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")["messages"].([]any)
	if len(records) != 2 || records[1].(map[string]any)["interrupted"] != true {
		t.Fatalf("history-data mid-turn = %v", records)
	}
	c.turn("next")
	reqs := chatRequests(llm)
	if ctx := contentOf(reqs[len(reqs)-1]); !strings.Contains(ctx, "user: start\nassistant: busy") {
		t.Fatalf("memory lost the stopped turn's reply:\n%s", ctx)
	}
}
