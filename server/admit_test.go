package server_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/app"
	"koe/testkit"
)

// allocated is how many bytes the process has allocated so far: what koe
// spends on a request shows in its growth, whatever the collector has
// given back since.
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

func firstLine(req string) string {
	line, _, _ := strings.Cut(req, "\r\n")
	return line
}

// What a request declares costs koe nothing before it is let in: a refused
// request is answered from its headers, at once, without reading or
// reserving its body; an accepted one over its route's limit likewise.
func TestRefusedFromHeadersAlone(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = testToken
	cfg.Server.MaxMessageBytes = 64 << 10
	cfg.Knowledge.MaxFileBytes = 10 << 20
	m := startKoe(t, cfg)
	addr := m.Addr()
	conf := cfg.Character.ConfUID
	const declared = 10551296 // just over a 10 MB upload
	for _, tc := range []struct {
		name, req string
		status    int
		says      string
	}{
		{"an upload without the token", "POST /api/characters/" + conf + "/documents HTTP/1.1\r\nHost: " + addr +
			"\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: " + fmt.Sprint(declared) + "\r\n\r\n", 401, "server.auth_token"},
		{"a chat request without the token", "POST /api/chat/stream HTTP/1.1\r\nHost: " + addr +
			"\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(declared) + "\r\n\r\n", 401, "server.auth_token"},
		{"a chunked body without the token", "POST /api/chat/stream HTTP/1.1\r\nHost: " + addr +
			"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", 401, "server.auth_token"},
		{"100-continue without the token", "POST /api/chat/stream HTTP/1.1\r\nHost: " + addr +
			"\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: " + fmt.Sprint(declared) + "\r\n\r\n", 401, "server.auth_token"},
		{"a foreign page", "PUT /api/characters/" + conf + "/prompts/system HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + testToken +
			"\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(declared) + "\r\n\r\n", 403, "server.allowed_origins"},
		{"a foreign host name", "POST /api/chat/stream HTTP/1.1\r\nHost: rebind.example\r\nAuthorization: Bearer " + testToken +
			"\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(declared) + "\r\n\r\n", 403, "server.allowed_hosts"},
		{"JSON over server.max_message_bytes", "POST /api/chat/stream HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + testToken +
			"\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(declared) + "\r\n\r\n", 413, "server.max_message_bytes"},
		{"an upload over knowledge.max_file_bytes", "POST /api/characters/" + conf + "/documents HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + testToken +
			"\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: 20000000\r\n\r\n", 413, "knowledge.max_file_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resps, closed := rawExchange(t, addr, tc.req)
			if len(resps) != 1 {
				t.Fatalf("%d answers before the hang guard, want 1 sent without waiting for the body", len(resps))
			}
			if r := resps[0]; r.status != tc.status || !strings.Contains(r.body, tc.says) {
				t.Fatalf("answered %d %s, want %d naming %s", r.status, r.body, tc.status, tc.says)
			}
			if !closed {
				t.Errorf("the connection stays open after a refusal whose body was not read")
			}
		})
	}

	// Twenty refused 10 MB requests, ten of them sending their bodies too,
	// cost koe far less than one such body: nothing of them is held.
	body := make([]byte, declared)
	before := allocated()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, addr)
			_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // hang guard
			req := "POST /api/characters/" + conf + "/documents HTTP/1.1\r\nHost: " + addr +
				"\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: " + fmt.Sprint(declared) + "\r\n\r\n"
			if _, err := io.WriteString(c, req); err != nil {
				t.Error(err)
				return
			}
			if i%2 == 0 {
				// koe answers and closes while this is still being sent.
				go func() { _, _ = c.Write(body) }()
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Errorf("no answer: %v", err)
				return
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("answered %d, want 401", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if spent := allocated() - before; spent > 8<<20 {
		t.Errorf("20 refused 10 MB requests made koe allocate %d MB; want nothing like one body", spent>>20)
	}
	if r := rawGet(t, addr, "/healthz", addr); r.status != 200 {
		t.Errorf("/healthz answered %d after the refusals", r.status)
	}
}

// A compressed body is refused (415), however it is compressed, before it
// is inflated: a few kilobytes of gzip can hold gigabytes.
func TestCompressedBodiesRefused(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	m := startKoe(t, cfg)
	addr := m.Addr()
	conf := cfg.Character.ConfUID

	// 64 MB of JSON whitespace around an object, gzipped twice: about a
	// kilobyte on the wire.
	plain := append(append([]byte(`{"text":"hi"`), bytes.Repeat([]byte(" "), 64<<20)...), '}')
	once := gzipped(t, plain)
	twice := gzipped(t, once)
	var deflated bytes.Buffer
	zw := zlib.NewWriter(&deflated)
	_, _ = zw.Write(plain)
	_ = zw.Close()

	before := allocated()
	for _, tc := range []struct {
		encoding string
		body     []byte
	}{
		{"gzip", once},
		{"gzip, gzip", twice},
		{"gzip,gzip", twice},
		{"deflate", deflated.Bytes()},
		{"br", []byte("not really brotli")},
		{"GZIP", once},
	} {
		for _, target := range []string{
			"POST /api/chat/stream",
			"PUT /api/characters/" + conf + "/prompts/system",
			"PUT /api/sessions/nobody/compression-rate",
		} {
			req := target + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Encoding: " + tc.encoding +
				"\r\nContent-Length: " + fmt.Sprint(len(tc.body)) + "\r\n\r\n" + string(tc.body)
			r := rawExchangeOne(t, addr, req)
			if r.status != http.StatusUnsupportedMediaType || !strings.Contains(r.body, "Content-Encoding") {
				t.Errorf("%s with Content-Encoding %q: %d %s, want 415 saying why", target, tc.encoding, r.status, r.body)
			}
		}
	}
	if spent := allocated() - before; spent > 32<<20 {
		t.Errorf("compressed bodies made koe allocate %d MB: they were inflated", spent>>20)
	}
	// identity is no compression at all.
	body := `{"text":"fine"}`
	r := rawExchangeOne(t, addr, "PUT /api/characters/"+conf+"/prompts/reminder HTTP/1.1\r\nHost: "+addr+
		"\r\nContent-Type: application/json\r\nContent-Encoding: identity\r\nContent-Length: "+fmt.Sprint(len(body))+"\r\nConnection: close\r\n\r\n"+body)
	if r.status != http.StatusOK {
		t.Errorf("Content-Encoding: identity answered %d %s", r.status, r.body)
	}
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Requests that parsers could read two ways are refused with a 400 and a
// closed connection: a second Host, bare LF line ends, a chunk size that is
// not hexadecimal, control characters in a header.
func TestLenientParsingRefused(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	m := startKoe(t, cfg)
	addr := m.Addr()
	prompt := "PUT /api/characters/" + cfg.Character.ConfUID + "/prompts/reminder HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n"
	for name, req := range map[string]string{
		"a second Host":          "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nHost: rebind.example\r\n\r\n",
		"a bare LF in a header":  "GET /healthz HTTP/1.1\r\nHost: " + addr + "\nX-A: b\r\n\r\n",
		"bare LF everywhere":     "GET /healthz HTTP/1.1\nHost: " + addr + "\nX-A: b\n\n",
		"a bare LF request line": "GET /healthz HTTP/1.1\nHost: " + addr + "\r\n\r\n",
		"a NUL in a header":      "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nX-A: a\x00b\r\n\r\n",
		"a control character":    "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nX-A: a\x01b\r\n\r\n",
		"a chunk size 0x0":       prompt + "Transfer-Encoding: chunked\r\n\r\n0x0\r\n\r\n",
		"a chunk size 0x10":      prompt + "Transfer-Encoding: chunked\r\n\r\n0x10\r\n{\"text\":\"a\"}   \r\n0\r\n\r\n",
		"a chunk with junk":      prompt + "Transfer-Encoding: chunked\r\n\r\n10 junk\r\n{\"text\":\"a\"}   \r\n0\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			resps, closed := rawExchange(t, addr, req)
			if len(resps) != 1 || resps[0].status != http.StatusBadRequest {
				t.Fatalf("answered %+v, want one 400", resps)
			}
			if !closed {
				t.Errorf("the connection stayed open")
			}
		})
	}
	// The well-formed chunked request those were made from works.
	resps, _ := rawExchange(t, addr, prompt+"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n10\r\n{\"text\":\"a\"}    \r\n0\r\n\r\n")
	if len(resps) != 1 || resps[0].status != http.StatusOK {
		t.Fatalf("a well-formed chunked body: %+v", resps)
	}
}

// The token never reaches an error body or the log, however the request
// that carried it was malformed.
func TestTokenNotQuoted(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = testToken
	var logs syncBuffer
	m := &app.Main{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	addr := m.Addr()
	creds := "Authorization: Bearer " + testToken + "\r\nCookie: koe_token=" + testToken + "\r\n"
	requests := []string{
		"GET /api/sessions?token=" + testToken + " HTTP/1.1\r\nHost: " + addr + "\r\n" + creds + "No colon here\r\n\r\n",
		"GET /api/sessions?token=" + testToken + " HTTP/1.1\r\nHost: " + addr + "\r\n" + creds + "X-A: a\x01b\r\n\r\n",
		"GET /api/sessions?token=" + testToken + " HTTP/1.1\r\n" + creds + "Host: " + addr + "\r\nX-Long: " + strings.Repeat("a", 8<<10) + "\r\n\r\n",
		"GET /api/sessions?token=" + testToken + " HTTP/1.1\r\n" + creds + "Host: " + addr + "\r\nHost: " + addr + "\r\n\r\n",
		"GET /api/sessions?token=" + testToken + " HTTP/1.1\r\n" + creds + "Host: " + addr + "\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"GET\x00 /client-ws?token=" + testToken + " HTTP/1.1\r\n" + creds + "Host: " + addr + "\r\n\r\n",
	}
	for _, req := range requests {
		resps, _ := rawExchange(t, addr, req)
		if len(resps) == 0 {
			t.Errorf("%q: no answer", firstLine(req))
		}
		for _, r := range resps {
			if r.status < 400 {
				t.Errorf("%q: answered %d", firstLine(req), r.status)
			}
			if strings.Contains(r.body, testToken) || strings.Contains(r.body, testToken[:12]) {
				t.Errorf("%q: the answer quotes the token: %s", firstLine(req), r.body)
			}
		}
	}
	// fasthttp logs after it has answered: wait for its line about the
	// last request, then look at everything.
	testkit.Eventually(t, "koe logged the refusals", func() bool {
		return strings.Count(logs.String(), "http request refused before any handler") >= len(requests)-1
	})
	if strings.Contains(logs.String(), testToken[:12]) {
		t.Errorf("the token is in koe's log:\n%s", logs.String())
	}
}

// A connection in the reserve past server.max_connections serves a probe
// and nothing else, and an idle one does not keep its place.
func TestProbesGetThroughAFullKoe(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.MaxConnections = 3
	cfg.Server.HealthConnections = 2
	m := startKoe(t, cfg)
	addr := m.Addr()
	for range 3 {
		dialGreeted(t, addr)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := rawGet(t, addr, path, addr); r.status != http.StatusOK {
			t.Errorf("GET %s on a full koe answered %d %s", path, r.status, r.body)
		}
	}
	r := rawGet(t, addr, "/api/sessions", addr)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "server.max_connections") {
		t.Errorf("an API request on a full koe answered %d %s, want 503 naming server.max_connections", r.status, r.body)
	}
	// Idle sockets fill the reserve, then lose their places.
	idle := []net.Conn{dialRaw(t, addr), dialRaw(t, addr)}
	if r := rawGet(t, addr, "/healthz", addr); r.status != http.StatusServiceUnavailable {
		t.Errorf("past the reserve, /healthz answered %d, want 503", r.status)
	}
	for _, c := range idle {
		waitClosed(t, c, "an idle connection in the reserve")
	}
	waitStatus(t, addr, http.StatusOK)
}
