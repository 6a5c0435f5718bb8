package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"koe/testkit/fakellm"
)

// chatRequests are the streamed (conversation) requests the LLM got;
// summaries are asked for without streaming.
func chatRequests(llm *fakellm.Server) []fakellm.Request {
	var out []fakellm.Request
	for _, r := range llm.Requests() {
		if r.Stream {
			out = append(out, r)
		}
	}
	return out
}

func memoryStates(frames []msg) []msg {
	var out []msg
	for _, f := range frames {
		if f.typ() == "memory-state" {
			out = append(out, f)
		}
	}
	return out
}

// waitSummaries reads frames until a memory-state shows n summaries.
func (c *client) waitSummaries(n int) msg {
	c.t.Helper()
	got := c.until(func(m msg) bool {
		if m.typ() != "memory-state" {
			return false
		}
		totals, _ := m["totals"].(map[string]any)
		return totals["summaries"] == float64(n)
	})
	return got[len(got)-1]
}

func TestMemoryStateAndSummariesOverWebSocket(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dialKoe(t, m.Addr())

	for i, text := range []string{"my cat is called Miso", "I live in Lisbon", "I like jazz"} {
		states := memoryStates(c.turn(text))
		if len(states) != 1 || states[0]["turns"] != float64(i+1) {
			t.Fatalf("turn %d: memory-state frames %v", i+1, states)
		}
	}
	// The summary of turns 1-3 is made in the background and announced.
	state := c.waitSummaries(1)
	sums := state["summaries"].([]any)
	rec := sums[0].(map[string]any)
	if got := rec["turns"].([]any); len(got) != 3 || got[0] != float64(1) || got[2] != float64(3) || rec["turn_length"] != float64(3) {
		t.Fatalf("summary record %v", rec)
	}
	if rec["compression_rate"] != 0.3 || rec["original_chars"].(float64) <= 0 || rec["summary"] == "" {
		t.Fatalf("summary record %v", rec)
	}

	c.turn("what do you know about me?")
	reqs := chatRequests(llm)
	sys := reqs[len(reqs)-1].Messages[0]
	if sys.Role != "system" || !strings.Contains(sys.Content, "[Turns 1-3]") {
		t.Fatalf("turn 4 system message lacks the summary: %q", sys.Content)
	}
	if ctx := contentOf(reqs[len(reqs)-1]); strings.Contains(ctx, "user: my cat is called Miso") {
		t.Fatalf("summarised turn still sent raw:\n%s", ctx)
	}

	// The exact context of that call, over WebSocket.
	ctxMsg := c.request(msg{"type": "fetch-context"}, "context")
	if ctxMsg["summaries"] != float64(1) || ctxMsg["estimated_tokens"].(float64) <= 0 || len(ctxMsg["messages"].([]any)) < 2 {
		t.Fatalf("context = %v", ctxMsg)
	}

	// The compression rate is per session and checked.
	if st := c.request(msg{"type": "set-compression-rate", "rate": 0.2}, "memory-state"); st["compression_rate"] != 0.2 {
		t.Fatalf("after set-compression-rate: %v", st)
	}
	c.expectError(msg{"type": "set-compression-rate", "rate": 0.9}, "outside")
	c.expectError(msg{"type": "set-compression-rate"}, "missing")
}

func TestSummariesSurviveRestart(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	dir := t.TempDir()
	cfg := testConfig(t, dir, llm.URL())
	cfg.Character.TTS.Engine = "none"
	first := startKoe(t, cfg)
	c := dialKoe(t, first.Addr())
	for _, text := range []string{"one", "two", "three"} {
		c.turn(text)
	}
	c.waitSummaries(1)
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"].(string)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	summaryCalls := len(llm.Requests()) - len(chatRequests(llm))

	second := startKoe(t, cfg)
	c = dialKoe(t, second.Addr())
	c.send(msg{"type": "fetch-and-set-history", "history_uid": uid})
	if got := c.next(); got.typ() != "history-data" {
		t.Fatalf("got %v", got)
	}
	state := c.next()
	if state.typ() != "memory-state" || state["totals"].(map[string]any)["summaries"] != float64(1) || state["turns"] != float64(3) {
		t.Fatalf("memory-state after reload = %v", state)
	}
	c.turn("four")
	reqs := chatRequests(llm)
	if !strings.Contains(reqs[len(reqs)-1].Messages[0].Content, "[Turns 1-3]") {
		t.Fatalf("reloaded summary not used: %q", reqs[len(reqs)-1].Messages[0].Content)
	}
	if n := len(llm.Requests()) - len(chatRequests(llm)); n != summaryCalls {
		t.Fatalf("%d summary calls after the restart, want none new (%d before)", n-summaryCalls, summaryCalls)
	}
}

func TestPromptsOverWebSocketAndREST(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dialKoe(t, m.Addr())
	other := dialKoe(t, m.Addr())

	got := c.request(msg{"type": "fetch-system-prompt"}, "system-prompt")
	if got["default"] != true || !strings.Contains(got["text"].(string), "voice conversation") {
		t.Fatalf("default system prompt = %v", got)
	}
	got = c.request(msg{"type": "set-system-prompt", "prompt": "You are a pirate, {human}."}, "system-prompt")
	if got["default"] != false || got["text"] != "You are a pirate, {human}." {
		t.Fatalf("after set = %v", got)
	}
	// Saved per character: the other session of the same character uses it too.
	other.turn("ahoy")
	reqs := chatRequests(llm)
	if sys := reqs[len(reqs)-1].Messages[0].Content; !strings.HasPrefix(sys, "You are a pirate, Human.") {
		t.Fatalf("system message = %q", sys)
	}

	base := "http://" + m.Addr() + "/api/characters/" + cfg.Character.ConfUID + "/prompts/"
	status, body := httpDo(t, "PUT", base+"reminder", "application/json", `{"text":"Answer in French."}`)
	if status != 200 || body["text"] != "Answer in French." || body["default"] != false {
		t.Fatalf("PUT reminder = %d %v", status, body)
	}
	c.turn("hello")
	reqs = chatRequests(llm)
	last := reqs[len(reqs)-1].Messages
	if tail := last[len(last)-1]; tail.Role != "user" || !strings.HasSuffix(tail.Content, "hello\n\nAnswer in French.") {
		t.Fatalf("last message = %+v, want the reminder", tail)
	}
	if got := c.request(msg{"type": "fetch-reminder"}, "reminder"); got["text"] != "Answer in French." {
		t.Fatalf("fetch-reminder = %v", got)
	}
	if status, body := httpDo(t, "GET", base+"system", "", ""); status != 200 || body["text"] != "You are a pirate, {human}." {
		t.Fatalf("GET system = %d %v", status, body)
	}
	// "" restores the default.
	if status, body := httpDo(t, "PUT", base+"system", "application/json", `{"text":""}`); status != 200 || body["default"] != true {
		t.Fatalf("reset = %d %v", status, body)
	}
	if status, _ := httpDo(t, "PUT", base+"system", "text/plain", `{"text":"x"}`); status != http.StatusUnsupportedMediaType {
		t.Fatalf("PUT without JSON = %d", status)
	}
	if status, _ := httpDo(t, "GET", base+"secret", "", ""); status != http.StatusNotFound {
		t.Fatalf("unknown prompt = %d", status)
	}
	// Unknown characters are 404, for reading and writing: nothing is
	// saved under a conf_uid no character has.
	for _, conf := range []string{"..%2Fx", "nobody"} {
		if status, _ := httpDo(t, "GET", "http://"+m.Addr()+"/api/characters/"+conf+"/prompts/system", "", ""); status != http.StatusNotFound {
			t.Fatalf("GET unknown conf uid %q = %d", conf, status)
		}
		if status, _ := httpDo(t, "PUT", "http://"+m.Addr()+"/api/characters/"+conf+"/prompts/system", "application/json", `{"text":"x"}`); status != http.StatusNotFound {
			t.Fatalf("PUT unknown conf uid %q = %d", conf, status)
		}
	}
}

func TestSessionsREST(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dialKoe(t, m.Addr())
	uid := c.request(msg{"type": "request-init-config"}, "set-model-and-conf").str("client_uid")
	base := "http://" + m.Addr() + "/api/sessions"
	if status, _ := httpDo(t, "GET", base+"/"+uid+"/context", "", ""); status != http.StatusNotFound {
		t.Fatalf("context before any call = %d", status)
	}
	c.turn("hi")
	status, body := httpDo(t, "GET", base+"/"+uid+"/context", "", "")
	if status != 200 || body["type"] != "context" || len(body["messages"].([]any)) < 2 {
		t.Fatalf("context = %d %v", status, body)
	}
	status, body = httpDo(t, "PUT", base+"/"+uid+"/compression-rate", "application/json", `{"rate":0.15}`)
	if status != 200 || body["compression_rate"] != 0.15 {
		t.Fatalf("PUT rate = %d %v", status, body)
	}
	if st := c.until(isType("memory-state")); st[len(st)-1]["compression_rate"] != 0.15 {
		t.Fatalf("session not told: %v", st)
	}
	if status, _ := httpDo(t, "PUT", base+"/"+uid+"/compression-rate", "application/json", `{"rate":7}`); status != http.StatusBadRequest {
		t.Fatalf("bad rate = %d", status)
	}
	if status, _ := httpDo(t, "GET", base+"/nobody/memory", "", ""); status != http.StatusNotFound {
		t.Fatalf("unknown session = %d", status)
	}
	resp, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list) != 1 || list[0]["client_uid"] != uid {
		t.Fatalf("sessions = %v, %v", list, err)
	}
}

func httpDo(t *testing.T, method, url, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out
}
