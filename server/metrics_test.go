package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"koe/testkit/fakellm"
)

// get sends a GET to koe with the given headers and returns the status
// and body.
func get(t *testing.T, url string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{Timeout: time.Minute} // a hang guard only
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// scraped is one scrape of /metrics, parsed as Prometheus parses it.
type scraped map[string]*dto.MetricFamily

func scrape(t *testing.T, addr string, header http.Header) scraped {
	t.Helper()
	status, body := get(t, "http://"+addr+"/metrics", header)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not in the text format: %v", err)
	}
	return fams
}

// value is a counter's or gauge's value, or a histogram's count, of the
// series of name with labels (name=value pairs); -1 if there is none.
func (s scraped) value(name string, labels ...string) float64 {
	fam := s[name]
	if fam == nil {
		return -1
	}
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func (s scraped) want(t *testing.T, v float64, name string, labels ...string) {
	t.Helper()
	if got := s.value(name, labels...); got != v {
		t.Errorf("%s%v = %v, want %v", name, labels, got, v)
	}
}

// TestMetrics: a real koe runs completed, failed, interrupted and stopped turns,
// and /metrics counts each of them, their first token and first audio,
// the LLM's failure by kind, the open session and the store's writes.
// /metrics wants the token; /healthz and /readyz do not.
func TestMetrics(t *testing.T) {
	var hold *holdLLM
	llm := startLLM(t, func(r fakellm.Request) fakellm.Reply {
		switch text := r.UserWords(); {
		case strings.Contains(text, "fail"):
			return fakellm.Reply{Status: http.StatusUnauthorized, ErrorMessage: "bad key"}
		case strings.Contains(text, "story"):
			// Held after the first sentence, until the test ends.
			return hold.reply("Once upon a time there was a fox. It lived in a quiet wood.", 9)
		}
		return fakellm.Reply{Tokens: fakellm.Words("Hello there. How are you today?")}
	})
	hold = newHold(t)
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Server.AuthToken = testToken
	m := startKoe(t, cfg)
	auth := http.Header{"Authorization": {"Bearer " + testToken}}

	before := scrape(t, m.Addr(), auth)
	before.want(t, 0, "koe_turns_started_total")
	before.want(t, 0, "koe_turns_ended_total", "outcome", "completed")
	before.want(t, 0, "koe_sessions_open", "kind", "websocket")
	before.want(t, 0, "koe_queue_drops_total", "queue", "watcher")
	if before["go_goroutines"] == nil || before["process_open_fds"] == nil {
		t.Error("the Go and process collectors are missing")
	}

	c := dial(t, m.Addr(), auth)
	c.until(isControl("start-mic"))
	const completed = 3
	for range completed {
		c.turn("hi")
	}
	// A failing LLM: the client gets an error frame, then chain-end.
	c.send(msg{"type": "text-input", "text": "fail now", "images": []any{}})
	c.until(isType("error"))
	c.until(isControl("conversation-chain-end"))
	// An interrupted turn: it has sent audio when the client interrupts.
	c.send(msg{"type": "text-input", "text": "tell me a story", "images": []any{}})
	c.until(isType("audio"))
	c.send(msg{"type": "interrupt-signal", "text": "Once upon a time"})
	// The interrupt is handled (the turn has ended) before the heartbeat.
	c.silent()
	// A turn stopped from outside: the stop request answers once it has
	// ended.
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"].(string)
	c.send(msg{"type": "text-input", "text": "another story", "images": []any{}})
	c.until(isType("audio"))
	req, err := http.NewRequest(http.MethodPost, "http://"+m.Addr()+"/api/chat/"+uid+"/stop", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stop: %d", resp.StatusCode)
	}
	c.until(isControl("interrupt"))

	s := scrape(t, m.Addr(), auth)
	s.want(t, completed+3, "koe_turns_started_total")
	s.want(t, completed, "koe_turns_ended_total", "outcome", "completed")
	s.want(t, 1, "koe_turns_ended_total", "outcome", "failed")
	s.want(t, 1, "koe_turns_ended_total", "outcome", "interrupted")
	s.want(t, 1, "koe_turns_ended_total", "outcome", "stopped")
	// Every turn that reached the LLM's answer streamed and spoke.
	s.want(t, completed+2, "koe_first_token_seconds")
	s.want(t, completed+2, "koe_first_audio_seconds")
	s.want(t, 1, "koe_dependency_errors_total", "service", "llm", "kind", "unauthorized")
	s.want(t, 1, "koe_sessions_open", "kind", "websocket")
	// Each turn stores the user's message; the first creates the history.
	s.want(t, 1, "koe_store_operation_seconds", "op", "create_with")
	if n := s.value("koe_store_operation_seconds", "op", "append"); n < completed+3 {
		t.Errorf("store appends timed: %v, want at least %d", n, completed+3)
	}
	if n := s.value("koe_store_errors_total", "op", "append"); n > 0 {
		t.Errorf("store append failures counted: %v", n)
	}

	// The token guards /metrics as it guards the API; the probes are open.
	if status, _ := get(t, "http://"+m.Addr()+"/metrics", nil); status != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", status)
	}
	if status, _ := get(t, "http://"+m.Addr()+"/metrics", http.Header{"Authorization": {"Bearer wrong-token-0123456789abcdef"}}); status != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d, want 401", status)
	}
	if status, body := get(t, "http://"+m.Addr()+"/readyz", nil); status != http.StatusOK || !strings.Contains(body, `"store":"ok"`) {
		t.Errorf("/readyz without the token: %d %s, want 200 with the store ok", status, body)
	}
	if status, _ := get(t, "http://"+m.Addr()+"/healthz", nil); status != http.StatusOK {
		t.Errorf("/healthz without the token: %d, want 200", status)
	}
	// The Host check applies to all of them.
	for _, path := range []string{"/metrics", "/readyz"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+m.Addr()+path, nil)
		req.Host = "rebound.example"
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s for a foreign Host: %d, want 403", path, resp.StatusCode)
		}
	}
}

// TestMetricsOff: server.metrics: false serves no /metrics; the probes stay.
func TestMetricsOff(t *testing.T) {
	llm := startLLM(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: fakellm.Words("Hi.")} })
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.Metrics = false
	m := startKoe(t, cfg)
	c := dial(t, m.Addr(), nil)
	c.until(isControl("start-mic"))
	c.turn("hello") // turns run without an observer
	if status, _ := get(t, "http://"+m.Addr()+"/metrics", nil); status != http.StatusNotFound {
		t.Errorf("/metrics with server.metrics false: %d, want 404", status)
	}
	status, body := get(t, "http://"+m.Addr()+"/readyz", nil)
	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil || status != http.StatusOK || ready.Status != "ready" || ready.Checks["store"] != "ok" {
		t.Errorf("/readyz: %d %s (%v)", status, body, err)
	}
}
