package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// TestReadyz: /readyz answers 200 while the history store answers, and
// 503 naming the store once the database is closed under koe; /healthz
// still says alive. Neither needs the token, and neither tells why.
func TestReadyz(t *testing.T) {
	llm := koetest.StartLLM(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: fakellm.Words("Hi.")} })
	cfg := koetest.Config(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = "ready-token-0123456789abcdef"
	m := koetest.StartKoe(t, cfg)
	client := &http.Client{Timeout: time.Minute} // a hang guard only

	probe := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := client.Get("http://" + m.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%s: %d %q is not JSON: %v", path, resp.StatusCode, body, err)
		}
		return resp.StatusCode, out
	}

	if status, body := probe("/readyz"); status != http.StatusOK || body["status"] != "ready" {
		t.Fatalf("/readyz with the store open: %d %v", status, body)
	}
	if err := m.CloseStore(); err != nil {
		t.Fatal(err)
	}
	status, body := probe("/readyz")
	failing, _ := body["failing"].([]any)
	if status != http.StatusServiceUnavailable || len(failing) != 1 || failing[0] != "store" {
		t.Fatalf("/readyz with the store closed: %d %v, want 503 naming the store", status, body)
	}
	// Nothing about the database (its path, its error) goes to whoever probes.
	if len(body) != 3 {
		t.Errorf("/readyz says more than status, failing and checks: %v", body)
	}
	if status, body := probe("/healthz"); status != http.StatusOK || body["status"] != "ok" {
		t.Errorf("/healthz with the store closed: %d %v (the process is alive)", status, body)
	}
}
