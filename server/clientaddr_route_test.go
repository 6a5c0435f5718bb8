package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"koe/server"
	"koe/testkit"
)

// The address koe logs of a client: behind a trusted proxy the one its
// X-Forwarded-For gives (the rightmost not a trusted proxy); from any
// other peer the peer's own, whatever the header says.
func TestClientAddressFromTrustedProxy(t *testing.T) {
	const forwarded = "198.51.100.66, 203.0.113.7" // the client wrote the first, the proxy the second
	for _, tc := range []struct {
		name    string
		proxies []string
		want    string
	}{
		{"no proxy trusted", nil, "127.0.0.1"},
		{"another proxy trusted", []string{"10.0.0.0/8"}, "127.0.0.1"},
		{"this peer trusted", []string{"10.0.0.0/8", "127.0.0.1"}, "203.0.113.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := startFake(t, func(o *server.Options) { o.Config.TrustedProxies = tc.proxies })
			header := http.Header{"X-Forwarded-For": {forwarded}}

			ws, _, err := websocket.DefaultDialer.Dial("ws://"+k.addr+"/client-ws", header)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			line := loggedLine(t, k, "client connected")
			if !strings.Contains(line, " ip="+tc.want+" ") {
				t.Errorf("want ip=%s: %s", tc.want, line)
			}

			watcher, _, err := websocket.DefaultDialer.Dial("ws://"+k.addr+"/client-ws?watch=character:koe_default", header)
			if err != nil {
				t.Fatal(err)
			}
			defer watcher.Close()
			if line := loggedLine(t, k, "watcher connected"); !strings.Contains(line, " ip="+tc.want+" ") {
				t.Errorf("want ip=%s: %s", tc.want, line)
			}

			// A foreign page is refused, and logged with who sent it.
			req, _ := http.NewRequest("GET", "http://"+k.addr+"/api/histories", nil)
			req.Header.Set("Origin", "https://evil.example")
			req.Header.Set("X-Forwarded-For", forwarded)
			if r := exchange(t, req); r.status != http.StatusForbidden {
				t.Fatalf("foreign origin: %d", r.status)
			}
			if line := loggedLine(t, k, "foreign web page refused"); !strings.Contains(line, " ip="+tc.want+" ") {
				t.Errorf("want ip=%s: %s", tc.want, line)
			}
		})
	}
}

// loggedLine waits until k has logged a line holding msg, and returns it.
func loggedLine(t *testing.T, k *fakeKoe, msg string) string {
	t.Helper()
	return testkit.Await(t, "a log line with "+msg, func() (string, bool) {
		for line := range strings.Lines(k.logs.String()) {
			if strings.Contains(line, msg) {
				return line, true
			}
		}
		return "", false
	})
}
