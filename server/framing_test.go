package server_test

import (
	"strings"
	"testing"
)

// A request whose length two parsers could read differently (RFC 9112
// section 6.3) is refused with 400 and its connection closed, so that a
// request hidden behind it, which a proxy in front of koe would have
// counted as body, is never answered.
func TestAmbiguousFramingIsRefused(t *testing.T) {
	llm := startLLM(t, nil)
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	addr := m.Addr()
	post := "PUT /api/characters/koe_default/prompts/system HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n"
	hidden := "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
	chunked := "0\r\n\r\n"

	for name, req := range map[string]string{
		"content-length and chunked":      post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + hidden,
		"chunked and content-length":      post + "Transfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n" + chunked + hidden,
		"two content-lengths":             post + "Content-Length: 0\r\nContent-Length: 44\r\n\r\n" + hidden,
		"content-length list":             post + "Content-Length: 0, 44\r\n\r\n" + hidden,
		"same content-length twice":       post + "Content-Length: 0\r\nContent-Length: 0\r\n\r\n" + hidden,
		"gzip then chunked":               post + "Transfer-Encoding: gzip, chunked\r\n\r\n" + chunked + hidden,
		"chunked not last":                post + "Transfer-Encoding: chunked, identity\r\n\r\n" + chunked + hidden,
		"identity":                        post + "Transfer-Encoding: identity\r\n\r\n" + hidden,
		"two transfer-encodings":          post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n" + chunked + hidden,
		"transfer-encoding in HTTP/1.0":   strings.Replace(post, "HTTP/1.1", "HTTP/1.0", 1) + "Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + hidden,
		"space before colon":              post + "Transfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\n" + chunked + hidden,
		"unknown coding":                  post + "Transfer-Encoding: xchunked\r\n\r\n" + chunked + hidden,
		"chunked with content-length get": "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + hidden,
	} {
		resps, closed := rawExchange(t, addr, req)
		if len(resps) != 1 || resps[0].status != 400 || !closed {
			var got []int
			for _, r := range resps {
				got = append(got, r.status)
			}
			t.Errorf("%s: answered %v (closed %v), want one 400 and a closed connection", name, got, closed)
		}
	}

	// Honest pipelining still works: a chunked body, then a second request.
	body := `{"text":"hello"}`
	req := post + "Transfer-Encoding: chunked\r\n\r\n" + "10\r\n" + body + "\r\n0\r\n\r\n" +
		"GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nConnection: close\r\n\r\n"
	resps, _ := rawExchange(t, addr, req)
	if len(resps) != 2 || resps[0].status != 200 || resps[1].status != 200 || !strings.Contains(resps[0].body, "hello") {
		t.Fatalf("pipelined chunked PUT and GET: %+v", resps)
	}
}
