package server_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit/cdp"
)

const evilOrigin = "http://evil.example"

// With web_client_dir set, other web pages must not be able to write
// through the REST API: no CORS answer outside the asset mounts, and an
// Origin check on REST.
func TestCORSOnlyOnAssetMounts(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.WebClientDir = t.TempDir()
	writeFile(t, filepath.Join(cfg.Server.WebClientDir, "index.html"), []byte("<!doctype html><title>olv</title>"))
	writeFile(t, filepath.Join(cfg.Server.BackgroundsDir, "room.png"), pngBytes(t))
	m := startKoe(t, cfg)
	addr := m.Addr()
	prompt := "/api/characters/koe_default/prompts/system"

	pre := rawExchangeOne(t, addr, "OPTIONS "+prompt+" HTTP/1.1\r\nHost: "+addr+"\r\nOrigin: "+evilOrigin+
		"\r\nAccess-Control-Request-Method: PUT\r\nAccess-Control-Request-Headers: content-type\r\nConnection: close\r\n\r\n")
	if got := pre.header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("preflight for PUT %s answered Access-Control-Allow-Origin: %s", prompt, got)
	}

	req, _ := http.NewRequest("PUT", "http://"+addr+prompt, strings.NewReader(`{"text":"pwned"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", evilOrigin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("PUT from a foreign origin = %d, want 403", resp.StatusCode)
	}
	if code, body := httpDo(t, "GET", "http://"+addr+prompt, "", ""); code != 200 || body["default"] != true {
		t.Errorf("the prompt changed: %d %v", code, body)
	}

	// Assets stay readable from other origins (the OLV client may run on
	// its own dev server), for reading only.
	bg := rawGet(t, addr, "/bg/room.png", addr, "Origin: "+evilOrigin)
	if bg.status != 200 || bg.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("GET /bg/room.png from another origin = %d, CORS %q", bg.status, bg.header.Get("Access-Control-Allow-Origin"))
	}
	bgPre := rawExchangeOne(t, addr, "OPTIONS /bg/room.png HTTP/1.1\r\nHost: "+addr+"\r\nOrigin: "+evilOrigin+
		"\r\nAccess-Control-Request-Method: PUT\r\nConnection: close\r\n\r\n")
	if methods := bgPre.header.Get("Access-Control-Allow-Methods"); strings.Contains(methods, "PUT") {
		t.Errorf("asset preflight allows %q", methods)
	}
	if page := rawGet(t, addr, "/", addr, "Origin: "+evilOrigin); page.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("the web client's page is CORS-open")
	}
}

func TestRESTOriginCheck(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AllowedOrigins = []string{"https://vtuber.example.org"}
	m := startKoe(t, cfg)
	addr := m.Addr()
	for origin, want := range map[string]int{
		"":                              200,
		"http://localhost:5173":         200,
		"http://127.0.0.1:3000":         200,
		"http://[::1]:3000":             200,
		"http://" + addr:                200,
		"https://vtuber.example.org":    200,
		evilOrigin:                      403,
		"http://localhost.evil.example": 403,
		"null":                          403,
	} {
		var h []string
		if origin != "" {
			h = append(h, "Origin: "+origin)
		}
		r := rawGet(t, addr, "/api/sessions", addr, h...)
		if r.status != want {
			t.Errorf("GET /api/sessions with Origin %q = %d, want %d", origin, r.status, want)
		}
		if want == 403 && !strings.Contains(r.body, "server.allowed_origins") {
			t.Errorf("refusal does not name server.allowed_origins: %s", r.body)
		}
	}
}

// DNS rebinding: a page on evil.example whose name now resolves to
// 127.0.0.1 talks to koe with Host and Origin both evil.example.
func TestHostCheck(t *testing.T) {
	llm := startLLM(t, nil)
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	addr := m.Addr()
	_, port, _ := net.SplitHostPort(addr)

	for host, want := range map[string]int{
		addr:                             200,
		"localhost:" + port:              200,
		"LocalHost":                      200,
		"koe.localhost:" + port:          200,
		"127.0.0.2":                      200,
		"[::1]:" + port:                  200,
		"192.168.1.20:" + port:           200, // a literal address cannot be rebound
		"[fe80::1]":                      200,
		"evil.example:" + port:           403,
		"evil.example":                   403,
		"localhost.evil.example":         403,
		"127.0.0.1.evil.example:" + port: 403,
	} {
		r := rawGet(t, addr, "/healthz", host)
		if r.status != want {
			t.Errorf("Host %q: %d, want %d", host, r.status, want)
		}
		if want == 403 && !strings.Contains(r.body, "server.allowed_hosts") {
			t.Errorf("Host %q refused without naming server.allowed_hosts: %s", host, r.body)
		}
	}

	h := http.Header{"Host": {"evil.example:" + port}, "Origin": {"http://evil.example:" + port}}
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/client-ws", h)
	if err == nil {
		_ = ws.Close()
		t.Fatal("a rebound page opened a WebSocket")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("rebound WebSocket: %v", err)
	}

	// Without Host there is nothing to check.
	for _, req := range []string{
		"GET /healthz HTTP/1.0\r\n\r\n",
		"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
	} {
		resps, _ := rawExchange(t, addr, req)
		if len(resps) != 1 || resps[0].status != 400 {
			t.Errorf("%q answered %v, want 400", req, resps)
		}
	}
	// The absolute form carries the host in the request line.
	if resps, _ := rawExchange(t, addr, "GET http://evil.example/healthz HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n"); len(resps) != 1 || resps[0].status != 403 {
		t.Errorf("absolute-form request to evil.example answered %v, want 403", resps)
	}
}

func rawExchangeOne(t *testing.T, addr, req string) rawResp {
	t.Helper()
	resps, _ := rawExchange(t, addr, req)
	if len(resps) != 1 {
		t.Fatalf("%q: %d responses, want 1", req, len(resps))
	}
	return resps[0]
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

const testToken = "test-token-0123456789abcdef"

// With server.auth_token set, everything but GET /healthz needs the token,
// in whichever form each kind of client can send it.
func TestAuthToken(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = testToken
	writeFile(t, filepath.Join(cfg.Server.BackgroundsDir, "room.png"), pngBytes(t))
	m := startKoe(t, cfg)
	addr := m.Addr()
	bearerHdr := "Authorization: Bearer " + testToken

	for _, tc := range []struct {
		path    string
		headers []string
		want    int
	}{
		{"/healthz", nil, 200},
		{"/api/sessions", nil, 401},
		{"/api/sessions", []string{"Authorization: Bearer wrong-token-0123456789abcdef"}, 401},
		{"/api/sessions", []string{"Authorization: Basic " + testToken}, 401},
		{"/api/sessions", []string{bearerHdr}, 200},
		{"/api/sessions", []string{"authorization: bearer " + testToken}, 200},
		{"/api/sessions?token=" + testToken + "x", nil, 401},
		{"/", nil, 401},
		{"/koe.js", nil, 401},
		{"/bg/room.png", nil, 401},
		{"/bg/room.png", []string{bearerHdr}, 200},
		{"/client-ws", nil, 401},
		{"/?token=" + testToken + "x", nil, 401},
		{"/?token=", nil, 401},
	} {
		r := rawGet(t, addr, tc.path, addr, tc.headers...)
		if r.status != tc.want {
			t.Errorf("GET %s %v = %d, want %d", tc.path, tc.headers, r.status, tc.want)
		}
		if r.status == 401 {
			if !strings.Contains(r.body, "Authorization: Bearer") || !strings.Contains(r.body, "?token=") ||
				!strings.Contains(r.body, "koe.token.") || r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("GET %s: the 401 does not say how to pass the token: %s", tc.path, r.body)
			}
			if r.header.Get("Set-Cookie") != "" {
				t.Errorf("GET %s: a refused request set a cookie", tc.path)
			}
		}
	}
	if r := rawExchangeOne(t, addr, "HEAD /healthz HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n"); r.status != 200 {
		t.Errorf("HEAD /healthz = %d", r.status)
	}
	if r := rawExchangeOne(t, addr, "OPTIONS /bg/room.png HTTP/1.1\r\nHost: "+addr+"\r\nOrigin: http://localhost:5173\r\nAccess-Control-Request-Method: GET\r\nConnection: close\r\n\r\n"); r.status == 401 {
		t.Errorf("an asset preflight (which never carries credentials) was refused")
	}

	// Opening a page with ?token= sets the cookie and drops the token from
	// the address.
	r := rawGet(t, addr, "/?lang=en&token="+testToken+"&x=1", addr)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/?lang=en&x=1" {
		t.Fatalf("page with ?token= = %d, Location %q", r.status, r.header.Get("Location"))
	}
	setCookie := r.header.Get("Set-Cookie")
	for _, attr := range []string{"koe_token=", "HttpOnly", "SameSite=Strict", "path=/"} {
		if !strings.Contains(strings.ToLower(setCookie), strings.ToLower(attr)) {
			t.Errorf("Set-Cookie %q lacks %s", setCookie, attr)
		}
	}
	if strings.Contains(setCookie, testToken) {
		t.Errorf("the cookie holds the token itself: %q", setCookie)
	}
	cookie := "Cookie: " + strings.SplitN(setCookie, ";", 2)[0]
	for _, path := range []string{"/", "/koe.js", "/bg/room.png", "/api/sessions"} {
		if r := rawGet(t, addr, path, addr, cookie); r.status != 200 {
			t.Errorf("GET %s with the cookie = %d", path, r.status)
		}
	}
	if r := rawGet(t, addr, "/", addr, "Cookie: koe_token=forged"); r.status != 401 {
		t.Errorf("a forged cookie got %d", r.status)
	}
	if r := rawGet(t, addr, "//evil.example/?token="+testToken, addr); strings.HasPrefix(r.header.Get("Location"), "//") {
		t.Errorf("the token redirect leads off-site: %q", r.header.Get("Location"))
	}

	// The WebSocket: query, cookie, or subprotocol; koe.v1 is chosen when
	// offered, nothing when only the token is.
	wsURL := "ws://" + addr + "/client-ws"
	for _, tc := range []struct {
		name      string
		url       string
		header    http.Header
		protocols []string
		want      string // the chosen subprotocol, or "refused"
	}{
		{"none", wsURL, nil, nil, "refused"},
		{"query", wsURL + "?token=" + testToken, nil, nil, ""},
		{"wrong query", wsURL + "?token=nope", nil, nil, "refused"},
		{"bearer", wsURL, http.Header{"Authorization": {"Bearer " + testToken}}, nil, ""},
		{"cookie", wsURL, http.Header{"Cookie": {strings.TrimPrefix(cookie, "Cookie: ")}}, nil, ""},
		{"token subprotocol only", wsURL, nil, []string{"koe.token." + testToken}, ""},
		{"token and koe.v1", wsURL, nil, []string{"koe.v1", "koe.token." + testToken}, "koe.v1"},
		{"wrong token subprotocol", wsURL, nil, []string{"koe.v1", "koe.token.nope"}, "refused"},
	} {
		d := websocket.Dialer{Subprotocols: tc.protocols}
		ws, resp, err := d.Dial(tc.url, tc.header)
		if tc.want == "refused" {
			if err == nil {
				_ = ws.Close()
				t.Errorf("%s: WebSocket accepted without the token", tc.name)
			} else if resp == nil || resp.StatusCode != 401 {
				t.Errorf("%s: %v, want 401", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if ws.Subprotocol() != tc.want {
			t.Errorf("%s: subprotocol %q, want %q", tc.name, ws.Subprotocol(), tc.want)
		}
		_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, data, err := ws.ReadMessage(); err != nil || !strings.Contains(string(data), "group-update") {
			t.Errorf("%s: first frame %q, %v", tc.name, data, err)
		}
		_ = ws.Close()
	}
}

// koe's own clients opt in to koe.v1; OLV clients offer nothing and get
// nothing.
func TestSubprotocol(t *testing.T) {
	llm := startLLM(t, nil)
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	for _, offer := range [][]string{nil, {"koe.v1"}, {"other", "koe.v1"}, {"other"}} {
		d := websocket.Dialer{Subprotocols: offer}
		ws, _, err := d.Dial("ws://"+m.Addr()+"/client-ws", nil)
		if err != nil {
			t.Fatalf("offer %v: %v", offer, err)
		}
		want := ""
		if len(offer) > 0 && offer[len(offer)-1] == "koe.v1" {
			want = "koe.v1"
		}
		if ws.Subprotocol() != want {
			t.Errorf("offer %v: chose %q, want %q", offer, ws.Subprotocol(), want)
		}
		_ = ws.Close()
	}
}

// In a browser, opening koe once with ?token= is enough for the page, its
// scripts and its WebSocket.
func TestAuthTokenInBrowser(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 800, Height: 600, MuteAudio: true})
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = testToken
	m := startKoe(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	page, err := browser.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := page.Navigate(ctx, "http://"+m.Addr()+"/?token="+testToken); err != nil {
		t.Fatal(err)
	}
	if err := page.WaitFor(ctx, `document.getElementById("status").textContent === "connected" && location.search === ""`); err != nil {
		t.Fatal(err)
	}
	if ex := page.Exceptions(); len(ex) > 0 {
		t.Fatalf("the page threw: %q", ex)
	}
}
