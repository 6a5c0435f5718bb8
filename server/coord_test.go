package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/coord"
	"koe/internal/fakellm"
	"koe/internal/redistest"
	"koe/protocol"
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
	deadline := time.Now().Add(time.Minute)
	for {
		code, failing := ready()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after Redis came back: %d %v", code, failing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
