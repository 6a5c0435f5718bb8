package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"koe/agent"
	"koe/app"
	"koe/protocol"
	"koe/testkit/fakellm"
)

// The memories API's answers, as a client reads them.
type memoryBody struct {
	HistoryUID string    `json:"history_uid"`
	Seq        uint64    `json:"seq"`
	Turn       int       `json:"turn"`
	Role       string    `json:"role"`
	Name       string    `json:"name"`
	Time       time.Time `json:"time"`
	Text       string    `json:"text"`
	Rank       int       `json:"rank"`
}

type recallBody struct {
	ConfUID  string       `json:"conf_uid"`
	Query    string       `json:"query"`
	Budget   int          `json:"budget"`
	Tokens   int          `json:"tokens"`
	Indexed  int          `json:"indexed"`
	Vectors  bool         `json:"vectors"`
	Block    string       `json:"block"`
	Memories []memoryBody `json:"memories"`
	Error    string       `json:"error"`
}

type listBody struct {
	ConfUID string `json:"conf_uid"`
	Stats   struct {
		Memories  int `json:"memories"`
		Histories int `json:"histories"`
	} `json:"stats"`
	Memories []memoryBody `json:"memories"`
	Next     string       `json:"next"`
	Error    string       `json:"error"`
}

// apiCall sends a request with optional headers ("Name: value") and
// decodes the JSON answer into v.
func apiCall(t *testing.T, method, rawURL string, v any, headers ...string) int {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Set(name, value)
	}
	a := exchange(t, req)
	if v != nil {
		if err := json.Unmarshal(a.body, v); err != nil {
			t.Fatalf("%s %s: %d %q is not JSON", method, rawURL, a.status, a.body)
		}
	}
	return a.status
}

// say runs a turn over the chat API (history "" starts one) and returns
// its history.
func say(t *testing.T, addr, historyUID, text string, headers ...string) string {
	t.Helper()
	body, _ := json.Marshal(protocol.ChatRequest{Message: text, HistoryUID: historyUID})
	req, err := http.NewRequest("POST", "http://"+addr+"/api/chat/invoke", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Set(name, value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer protocol.ChatMessage
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != 200 {
		t.Fatalf("invoke %q: %d %v", text, resp.StatusCode, err)
	}
	return answer.AdditionalKwargs.HistoryUID
}

// settle waits for recall to index what was said: an event, not a time.
func settle(t *testing.T, m *app.Main) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.SettleMemories(ctx); err != nil {
		t.Fatalf("recall did not settle: %v", err)
	}
}

func findMemory(ms []memoryBody, uid string, role string) (memoryBody, bool) {
	for _, m := range ms {
		if m.HistoryUID == uid && m.Role == role {
			return m, true
		}
	}
	return memoryBody{}, false
}

// TestMemoriesRecallListForget: a fact told in one conversation is what
// a question recalls; listing pages through every memory; forgetting one
// memory, a conversation and everything works, and only as asked; the
// histories stay and what is said later is remembered.
func TestMemoriesRecallListForget(t *testing.T) {
	llmSrv := startLLM(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: fakellm.Words("Noted.")} })
	m := startKoe(t, testConfig(t, t.TempDir(), llmSrv.URL()))
	conf := koeConf(t)
	base := "http://" + m.Addr() + "/api/characters/" + conf + "/memories"
	ask := func(q string, extra string) recallBody {
		t.Helper()
		var r recallBody
		if code := apiCall(t, "GET", base+"?q="+url.QueryEscape(q)+extra, &r); code != 200 {
			t.Fatalf("GET ?q=%s: %d %s", q, code, r.Error)
		}
		return r
	}
	list := func(query string) listBody {
		t.Helper()
		var l listBody
		if code := apiCall(t, "GET", base+query, &l); code != 200 {
			t.Fatalf("GET %s: %d %s", query, code, l.Error)
		}
		return l
	}

	bees := say(t, m.Addr(), "", "My sister Ayaka keeps bees in Hokkaido.")
	milk := say(t, m.Addr(), "", "Please remind me to buy oat milk tomorrow.")
	settle(t, m)

	r := ask("Where does Ayaka keep her bees?", "")
	fact, ok := findMemory(r.Memories, bees, "human")
	if !ok || fact.Text != "My sister Ayaka keeps bees in Hokkaido." || fact.Seq == 0 || fact.Rank < 1 {
		t.Fatalf("the fact is not recalled: %+v", r.Memories)
	}
	if r.ConfUID != conf || r.Query != "Where does Ayaka keep her bees?" || r.Budget != agent.DefaultRecallBudget ||
		r.Indexed != 4 || r.Tokens < 1 || r.Tokens > r.Budget || !strings.Contains(r.Block, "Ayaka keeps bees in Hokkaido") {
		t.Errorf("recall answer %+v", r)
	}
	for _, mem := range r.Memories {
		if strings.Contains(mem.Text, "oat milk") {
			t.Errorf("recalled the unrelated conversation: %+v", mem)
		}
	}
	if small := ask("Where does Ayaka keep her bees?", "&budget=60"); small.Budget != 60 || small.Tokens > 60 {
		t.Errorf("budget=60: budget %d, tokens %d", small.Budget, small.Tokens)
	}

	all := list("")
	if all.ConfUID != conf || all.Stats.Memories != 4 || all.Stats.Histories != 2 || len(all.Memories) != 4 || all.Next != "" {
		t.Fatalf("listing %+v", all)
	}
	for i := 1; i < len(all.Memories); i++ {
		if all.Memories[i].Time.After(all.Memories[i-1].Time) {
			t.Errorf("listing is not newest first: %+v", all.Memories)
		}
	}
	seen := map[memoryBody]bool{}
	cursor := ""
	for page := 0; ; page++ {
		if page > 4 {
			t.Fatal("paging with limit=1 does not end")
		}
		p := list("?limit=1&before=" + url.QueryEscape(cursor))
		if len(p.Memories) != 1 || p.Memories[0] != all.Memories[page] {
			t.Fatalf("page %d: %+v, want %+v", page, p.Memories, all.Memories[page])
		}
		seen[p.Memories[0]] = true
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	if len(seen) != 4 {
		t.Errorf("paging saw %d memories, want 4", len(seen))
	}

	// A bare DELETE forgets nothing.
	var e struct{ Error string }
	if code := apiCall(t, "DELETE", base, &e); code != 400 || !strings.Contains(e.Error, "all=true") {
		t.Errorf("bare DELETE: %d %q", code, e.Error)
	}
	if l := list(""); l.Stats.Memories != 4 {
		t.Fatalf("after a bare DELETE, %d memories", l.Stats.Memories)
	}

	one := base + "/" + bees + "/" + strconv.FormatUint(fact.Seq, 10)
	var forgot map[string]any
	if code := apiCall(t, "DELETE", one, &forgot); code != 200 || forgot["forgotten"] != true {
		t.Fatalf("DELETE one memory: %d %v", code, forgot)
	}
	if code := apiCall(t, "DELETE", one, &e); code != 404 {
		t.Errorf("forgetting it again: %d %q", code, e.Error)
	}
	r = ask("Where does Ayaka keep her bees?", "")
	if _, ok := findMemory(r.Memories, bees, "human"); ok || strings.Contains(r.Block, "Hokkaido") {
		t.Errorf("the forgotten memory is recalled: %+v", r)
	}

	if code := apiCall(t, "DELETE", base+"?history_uid="+bees, &forgot); code != 200 || forgot["count"] != 1.0 {
		t.Errorf("DELETE ?history_uid: %d %v, want the reply left in it", code, forgot)
	}
	var h protocol.ChatHistory
	if code := getJSON(t, "http://"+m.Addr()+"/api/histories/"+conf+"/"+bees, &h); code != 200 || len(h.Messages) != 2 {
		t.Errorf("the history itself: %d, %d messages", code, len(h.Messages))
	}
	if l := list(""); l.Stats.Memories != 2 || l.Memories[0].HistoryUID != milk || l.Memories[1].HistoryUID != milk {
		t.Errorf("after forgetting a conversation: %+v", l)
	}

	if code := apiCall(t, "DELETE", base+"?all=true", &forgot); code != 200 || forgot["count"] != 2.0 {
		t.Errorf("DELETE ?all=true: %d %v", code, forgot)
	}
	if l := list(""); l.Stats.Memories != 0 || len(l.Memories) != 0 {
		t.Errorf("after forgetting everything: %+v", l)
	}

	say(t, m.Addr(), bees, "The bees swarmed this morning.")
	settle(t, m)
	r = ask("Did the bees swarm?", "")
	if _, ok := findMemory(r.Memories, bees, "human"); !ok || strings.Contains(r.Block, "Hokkaido") {
		t.Errorf("what is said after forgetting: %+v", r.Memories)
	}
}

// TestMemoriesBadRequests: every refusal is a status with a JSON error
// that says what is wrong.
func TestMemoriesBadRequests(t *testing.T) {
	llmSrv := startLLM(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: fakellm.Words("Noted.")} })
	m := startKoe(t, testConfig(t, t.TempDir(), llmSrv.URL()))
	conf := koeConf(t)
	uid := say(t, m.Addr(), "", "I collect old maps.")
	settle(t, m)
	api := "http://" + m.Addr() + "/api/characters/"
	base := api + conf + "/memories"
	unknown := "2025-01-01_00-00-00_00000000000000000000000000000000"
	for _, c := range []struct {
		method, url string
		status      int
		says        string
	}{
		{"GET", api + "nobody/memories", 404, `"nobody"`},
		{"GET", api + "nobody/memories?q=maps", 404, `"nobody"`},
		{"DELETE", api + "nobody/memories?all=true", 404, `"nobody"`},
		{"GET", api + "bad!id/memories", 400, "not valid"},
		{"GET", base + "?q=", 400, `"q" is empty`},
		{"GET", base + "?q=%20%20", 400, `"q" is empty`},
		{"GET", base + "?q=maps&budget=lots", 400, "budget must be a whole number"},
		{"GET", base + "?q=maps&budget=10", 400, "budget 10 is out of range: 50 to 32000"},
		{"GET", base + "?q=maps&budget=40000", 400, "out of range"},
		{"GET", base + "?limit=501", 400, "limit 501 is out of range: 1 to 500"},
		{"GET", base + "?limit=-1", 400, "out of range"},
		{"GET", base + "?limit=ten", 400, "limit must be a whole number"},
		{"GET", base + "?before=yesterday", 400, "before must be the next of an earlier listing"},
		{"DELETE", base, 400, "?history_uid=UID"},
		{"DELETE", base + "?all=yes", 400, "all must be true"},
		{"DELETE", base + "?all=false", 400, "all must be true"},
		{"DELETE", base + "?all=true&history_uid=" + uid, 400, "not both"},
		{"DELETE", base + "?history_uid=../x", 400, "not valid"},
		{"DELETE", base + "?history_uid=", 400, "not valid"},
		{"DELETE", base + "?history_uid=" + unknown, 404, "no such history"},
		{"DELETE", base + "/" + unknown + "/2", 404, "no memory has seq 2"},
		{"DELETE", base + "/" + uid + "/999", 404, "no memory has seq 999"},
		{"DELETE", base + "/" + uid + "/two", 400, "seq must be a message id"},
		{"DELETE", base + "/" + uid + "/0", 400, "seq must be a message id"},
		{"DELETE", base + "/" + uid + "/-1", 400, "seq must be a message id"},
		{"DELETE", base + "/bad!id/2", 400, "not valid"},
	} {
		var e struct{ Error string }
		if code := apiCall(t, c.method, c.url, &e); code != c.status || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s %s: %d %q, want %d saying %s", c.method, strings.TrimPrefix(c.url, api), code, e.Error, c.status, c.says)
		}
	}
	var l listBody
	if code := apiCall(t, "GET", base, &l); code != 200 || l.Stats.Memories != 2 {
		t.Errorf("after the refusals: %d %+v", code, l)
	}
}

// TestMemoriesNeedTokenAndOrigin: the memories API is behind the token and
// the origin check like the rest; a refused DELETE forgets nothing.
func TestMemoriesNeedTokenAndOrigin(t *testing.T) {
	llmSrv := startLLM(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: fakellm.Words("Noted.")} })
	cfg := testConfig(t, t.TempDir(), llmSrv.URL())
	cfg.Server.AuthToken = testToken
	m := startKoe(t, cfg)
	bearer := "Authorization: Bearer " + testToken
	say(t, m.Addr(), "", "My locker code is 4512.", bearer)
	settle(t, m)
	base := "http://" + m.Addr() + "/api/characters/" + koeConf(t) + "/memories"

	var e struct{ Error string }
	for _, c := range []struct {
		method, url string
		headers     []string
		status      int
		says        string
	}{
		{"GET", base + "?q=locker", nil, 401, "Authorization: Bearer"},
		{"GET", base, []string{"Authorization: Bearer wrong-token-0123456789abcdef"}, 401, "server.auth_token"},
		{"DELETE", base + "?all=true", nil, 401, "Authorization: Bearer"},
		{"GET", base + "?q=locker", []string{bearer, "Origin: " + evilOrigin}, 403, "server.allowed_origins"},
		{"DELETE", base + "?all=true", []string{bearer, "Origin: " + evilOrigin}, 403, "server.allowed_origins"},
	} {
		if code := apiCall(t, c.method, c.url, &e, c.headers...); code != c.status || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s %s %v: %d %q, want %d saying %s", c.method, c.url, c.headers, code, e.Error, c.status, c.says)
		}
	}
	var r recallBody
	if code := apiCall(t, "GET", base+"?q=locker+code", &r, bearer, "Origin: http://localhost:5173"); code != 200 || len(r.Memories) == 0 {
		t.Fatalf("with the token: %d %+v", code, r)
	}
	var forgot map[string]any
	if code := apiCall(t, "DELETE", base+"?all=true", &forgot, bearer); code != 200 || forgot["count"] != 2.0 {
		t.Errorf("DELETE with the token: %d %v; want both memories, none forgotten before", code, forgot)
	}
}
