package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestLiveChatRoutes: /api/live is behind the token and the origin check
// like the rest of the API (a foreign page cannot pause or skip the
// stream), and says how to turn live chat on when it is off. (The routes
// with live chat on are tested end to end in app.)
func TestLiveChatRoutes(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = "live-secret"
	m := startKoe(t, cfg)
	base := "http://" + m.Addr()
	auth := []string{"Authorization: Bearer live-secret"}
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/live"}, {"POST", "/api/live/pause"}, {"POST", "/api/live/resume"}, {"POST", "/api/live/skip"},
	} {
		if code, body := liveCall(t, r.method, base+r.path, auth...); code != http.StatusNotFound || !strings.Contains(body, "live_chat.enabled") {
			t.Errorf("%s %s with live chat off = %d %s, want 404 naming live_chat.enabled", r.method, r.path, code, body)
		}
		if code, _ := liveCall(t, r.method, base+r.path); code != http.StatusUnauthorized {
			t.Errorf("%s %s without the token = %d, want 401", r.method, r.path, code)
		}
		if code, _ := liveCall(t, r.method, base+r.path, append(auth, "Origin: "+evilOrigin)...); code != http.StatusForbidden {
			t.Errorf("%s %s from a foreign page = %d, want 403", r.method, r.path, code)
		}
	}
}

// liveCall is apiCall answering the body's "error".
func liveCall(t *testing.T, method, url string, headers ...string) (int, string) {
	t.Helper()
	var body struct {
		Error string `json:"error"`
	}
	code := apiCall(t, method, url, &body, headers...)
	return code, body.Error
}
