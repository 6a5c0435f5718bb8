package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"koe/app"
	"koe/config"
	"koe/coord"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/logwatch"
	"koe/testkit/pgtest"
	"koe/testkit/redistest"
)

// logApplied is what recall logs once it applied news of another instance.
const logApplied = "recall: changes of another instance applied"

// TestRecallAcrossInstances: two koes on one PostgreSQL store and one
// Redis. What a conversation on one stores, the other's memories hold;
// what is forgotten through one, the other forgets.
func TestRecallAcrossInstances(t *testing.T) {
	dsn := pgtest.Schema(t)
	redis := redistest.Start(t)
	llm := koetest.StartLLM(t, fakellm.Echo(0))
	start := func(name string) (*app.Main, *logwatch.Handler) {
		cfg := koetest.Config(t, t.TempDir(), llm.URL())
		cfg.Store, cfg.StoreDSN = config.StorePostgres, dsn
		cfg.Coord.Backend, cfg.Coord.RedisURL = coord.Redis, redis.URL()
		log := logwatch.New(t, name)
		m := &app.Main{Config: cfg, Logger: log.Logger(), Getenv: func(string) string { return "" }}
		if err := m.Open(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m, log
	}
	a, _ := start("A")
	b, bLog := start("B")
	client := &http.Client{Timeout: time.Minute} // a hang guard only
	call := func(method, addr, path string, body any, out any) {
		t.Helper()
		var rd bytes.Buffer
		if body != nil {
			_ = json.NewEncoder(&rd).Encode(body)
		}
		req, err := http.NewRequest(method, "http://"+addr+path, &rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s", method, path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	const memories = "/api/characters/koe_default/memories"
	listed := func(m *app.Main) []string {
		t.Helper()
		var page struct {
			Memories []struct{ Text string } `json:"memories"`
		}
		call(http.MethodGet, m.Addr(), memories, nil, &page)
		var out []string
		for _, mem := range page.Memories {
			out = append(out, mem.Text)
		}
		return out
	}
	// B has the character's memories loaded before A stores anything.
	if got := listed(b); len(got) != 0 {
		t.Fatalf("B lists %q from an empty store", got)
	}

	const said = "My sister Alba keeps bees in Lugo"
	var answer protocol.ChatMessage
	call(http.MethodPost, a.Addr(), "/api/chat/invoke", protocol.ChatRequest{Message: said}, &answer)
	uid := answer.AdditionalKwargs.HistoryUID
	want := []string{"You said: " + said + ".", said}
	// A indexes the question and the answer, in one job or two: each news
	// B applies is an event; B lists both after one of them.
	for n := 1; !slices.Equal(listed(b), want); n++ {
		bLog.WaitFor(logApplied, n)
	}

	var forgot struct{ Count int }
	call(http.MethodDelete, a.Addr(), memories+"?history_uid="+url.QueryEscape(uid), nil, &forgot)
	if forgot.Count != 2 {
		t.Fatalf("A forgot %d memories, want 2", forgot.Count)
	}
	for n := bLog.Count(logApplied) + 1; len(listed(b)) != 0; n++ {
		bLog.WaitFor(logApplied, n)
	}
}
