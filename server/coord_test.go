package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/app"
	"koe/config"
	"koe/coord"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/logwatch"
	"koe/testkit/pgtest"
	"koe/testkit/redistest"
)

// withRedis coordinates the instance's turns through srv.
func withRedis(cfg config.Config, srv *redistest.Server) config.Config {
	cfg.Coord.Backend, cfg.Coord.RedisURL, cfg.Coord.Lease = coord.Redis, srv.URL(), time.Second
	return cfg
}

// TestChatStopAcrossInstances: two koe instances coordinated through one
// redis-server; a stop request to instance A ends the turn that instance
// B streams, which says so; a second stop finds nothing.
func TestChatStopAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("word ", 300)), Interval: 20 * time.Millisecond}))
	a := startKoe(t, withRedis(testConfig(t, t.TempDir(), llm.URL()), srv))
	b := startKoe(t, withRedis(testConfig(t, t.TempDir(), llm.URL()), srv))

	s := openStream(t, b.Addr(), protocol.ChatRequest{Message: "talk"})
	uid := s.next().message().AdditionalKwargs.HistoryUID
	s.until(func(ev chatEvent) bool { return ev.Type == protocol.EventToken })
	start := time.Now()
	resp := postJSON(t, "http://"+a.Addr()+"/api/chat/"+uid+"/stop", nil)
	took := time.Since(start)
	var res protocol.StopResult
	_ = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if resp.StatusCode != 200 || !res.Stopped || res.HistoryUID != uid {
		t.Fatalf("stop on A: %d %+v", resp.StatusCode, res)
	}
	t.Logf("POST stop on A → B's turn stopped and stored: %s", took.Round(time.Microsecond))
	waitDisconnect(t, llm, "stopped from the other instance")
	rest := describe(s.all())
	if rest[len(rest)-2] != "message ai interrupted" || rest[len(rest)-1] != "end" {
		t.Errorf("B's stream after the stop: %q", rest)
	}
	resp = postJSON(t, "http://"+a.Addr()+"/api/chat/"+uid+"/stop", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("second stop: %d, want 404", resp.StatusCode)
	}
}

// TestReadyzChecksRedis: with coord: redis, /readyz names the coordinator
// while redis-server is down, and is ready again once it is back.
func TestReadyzChecksRedis(t *testing.T) {
	srv := redistest.Start(t)
	llm := startLLM(t, nil)
	m := startKoe(t, withRedis(testConfig(t, t.TempDir(), llm.URL()), srv))
	ready := func() (int, []any) {
		t.Helper()
		var body struct {
			Failing []any `json:"failing"`
		}
		code := apiCall(t, "GET", "http://"+m.Addr()+"/readyz", &body)
		return code, body.Failing
	}
	if code, failing := ready(); code != http.StatusOK {
		t.Fatalf("/readyz with Redis up: %d %v", code, failing)
	}
	srv.Stop()
	if code, failing := ready(); code != http.StatusServiceUnavailable || len(failing) != 1 || failing[0] != "coord" {
		t.Fatalf("/readyz with Redis down: %d %v, want 503 naming coord", code, failing)
	}
	srv.Start()
	// go-redis dials again on the next command: the first probe after the
	// restart may still find the old connection broken.
	testkit.Await(t, "/readyz answers 200 after Redis came back", func() (string, bool) {
		code, failing := ready()
		return fmt.Sprintf("%d %v", code, failing), code == http.StatusOK
	})
}

// TestWatchersAcrossInstances: watchers connected to instance B follow a
// client and a character that talk through instance A, as they would on
// A: greeted with the speaker's character, then the turn's frames in the
// speaker's order, then an interrupt.
func TestWatchersAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	llm := startLLM(t, func(r fakellm.Request) fakellm.Reply {
		if strings.Contains(contentOf(r), "long") {
			return fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("La la la. ", 2000)), Interval: time.Millisecond}
		}
		return fakellm.Echo(0)(r)
	})
	cfgA := withFakeSpeech(withRedis(testConfig(t, t.TempDir(), llm.URL()), srv), llm)
	cfgB := withFakeSpeech(withRedis(testConfig(t, t.TempDir(), llm.URL()), srv), llm)
	a, b := startKoe(t, cfgA), startKoe(t, cfgB)
	conf := cfgA.Character.ConfUID

	speaker := dialURL(t, websocket.DefaultDialer, "ws://"+a.Addr()+"/client-ws?client_uid=desk", nil)
	speaker.until(isControl("start-mic"))
	byConf := dialWatcher(t, b.Addr(), "watch_conf="+url.QueryEscape(conf), false)
	byConf.greeted()
	// Greeted from A, which has learnt what B's watchers follow.
	byClient := dialWatcher(t, b.Addr(), "watch=desk", false)
	if g := byClient.greeted(); g.str("conf_uid") != conf {
		t.Fatalf("client watcher on B greeted with %v", g)
	}

	frames := speaker.turn("Good evening, chat. How is everyone doing today?")
	want := watched(frames, false)
	if !slices.Contains(want, "backend-synth-complete") || len(want) < 6 {
		t.Fatalf("the speaker's turn has too little to watch: %v", want)
	}
	for name, w := range map[string]*client{"by client": byClient, "by character": byConf} {
		if got := describeFrames(w.until(isControl("conversation-chain-end"))); !slices.Equal(got, want) {
			t.Fatalf("watcher %s on B saw\n%v\nwant\n%v", name, got, want)
		}
	}

	// The speaker interrupts a long reply once B's watchers hear it: they
	// are told. (What they had not been written by then is dropped.)
	speaker.send(msg{"type": "text-input", "text": "say something long"})
	speaker.until(isType("audio"))
	for _, w := range []*client{byClient, byConf} {
		w.until(isType("audio"))
	}
	speaker.send(msg{"type": "interrupt-signal", "text": "La la"})
	for _, w := range []*client{byClient, byConf} {
		w.until(isControl("interrupt"))
	}
	// The speaker reconnects through B: its watchers are greeted there.
	speaker.ws.Close()
	again := dialURL(t, websocket.DefaultDialer, "ws://"+b.Addr()+"/client-ws?client_uid=desk", nil)
	again.until(isControl("start-mic"))
	// What the interrupted turn still sent may come first.
	if g := byClient.until(isType("set-model-and-conf")); g[len(g)-1].str("conf_uid") != conf {
		t.Fatalf("after the reconnect through B the watcher was greeted with %v", g[len(g)-1])
	}
	if n := byClient.next(); n.typ() != "group-update" {
		t.Fatalf("after set-model-and-conf: %v", n)
	}
	speaker = again
	frames = speaker.turn("And now from here.")
	if got, want := describeFrames(byClient.until(isControl("conversation-chain-end"))), watched(frames, false); !slices.Equal(got, want) {
		t.Fatalf("after the reconnect through B the watcher saw\n%v\nwant\n%v", got, want)
	}
}

// TestPromptAcrossInstances: two instances on one PostgreSQL store and one
// Redis; a prompt saved through A reaches a session open on B from its
// next turn on.
func TestPromptAcrossInstances(t *testing.T) {
	dsn := pgtest.Schema(t)
	srv := redistest.Start(t)
	llm := startLLM(t, fakellm.Echo(0))
	shared := func() config.Config {
		cfg := withRedis(testConfig(t, t.TempDir(), llm.URL()), srv)
		cfg.Store, cfg.StoreDSN = config.StorePostgres, dsn
		return cfg
	}
	a := startKoe(t, shared())
	bLog := logwatch.New(t, "B")
	b := &app.Main{Config: shared(), Logger: bLog.Logger(), Getenv: func(string) string { return "" }}
	if err := b.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })

	speaker := dialGreeted(t, b.Addr())
	speaker.turn("before")
	prompt := "/api/characters/koe_default/prompts/system"
	if status, body := httpDo(t, "PUT", "http://"+a.Addr()+prompt, "application/json", `{"text":"You are Koe, saved on A."}`); status != http.StatusOK {
		t.Fatalf("PUT prompt on A: %d %s", status, body)
	}
	bLog.WaitFor("prompts saved through another instance applied", 1)
	speaker.turn("after")
	reqs := chatRequests(llm)
	if got := reqs[len(reqs)-1].Messages[0].Content; !strings.Contains(got, "saved on A") {
		t.Fatalf("B's next turn had the system prompt %q", got)
	}
}
