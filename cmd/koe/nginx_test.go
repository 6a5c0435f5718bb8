package main

import (
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"koe/testkit"
)

// nginx as deploy/nginx.conf sets it up logs each request without what
// can carry koe's token: the query, the Referer's query, the headers.
func TestNginxAccessLogWithoutToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nginx")
	}
	const token = "nginx-token-0123456789abcdef"
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = upstream.Serve(l) }()
	t.Cleanup(func() { _ = upstream.Close() })
	addr, dir := startNginxIn(t, []string{l.Addr().String(), l.Addr().String(), l.Addr().String()})

	req, _ := http.NewRequest("GET", httpURL(addr)+"/api/sessions?x=1&token="+token, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Cookie", "koe_token="+token)
	req.Header.Set("Referer", httpURL(addr)+"/?token="+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("through nginx: %d", resp.StatusCode)
	}
	// nginx writes its access line once the response is sent.
	var line string
	testkit.Eventually(t, "nginx logs the request", func() bool {
		data, _ := os.ReadFile(accessLogPath(dir))
		line = string(data)
		return strings.Contains(line, "/api/sessions")
	})
	if strings.Contains(line, token[:12]) {
		t.Errorf("nginx's access log holds the token: %s", line)
	}
	if !strings.Contains(line, `"GET /api/sessions HTTP/1.1" 200`) || !strings.Contains(line, `"`+httpURL(addr)+`/"`) {
		t.Errorf("the access line lost what it should say: %s", line)
	}
}
