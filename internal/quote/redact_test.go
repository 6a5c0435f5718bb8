package quote

import (
	"fmt"
	"strings"
	"testing"
)

const secret = "s3cr3t-0123456789abcdef"

func TestRedact(t *testing.T) {
	raw := "GET /client-ws?x=1&token=" + secret + " HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + secret +
		"\r\nCookie: koe_token=" + secret + "\r\nSec-WebSocket-Protocol: koe.v1, koe.token." + secret + "\r\n\r\n"
	for name, s := range map[string]string{
		"raw":     raw,
		"quoted":  fmt.Sprintf("error when reading request headers: %q", raw),
		"bearer":  "upstream said: bearer " + secret,
		"query":   "GET /?token=" + secret,
		"api key": "https://llm.example/v1?api_key=" + secret + "&x=1",
	} {
		got := Redact(s)
		if strings.Contains(got, secret) || strings.Contains(got, secret[:8]) {
			t.Errorf("%s: the secret is still there: %s", name, got)
		}
		if !strings.Contains(got, Redacted) {
			t.Errorf("%s: nothing says what was taken out: %s", name, got)
		}
	}
	// What is not a credential stays as it was, line ends included.
	got := Redact(raw)
	for _, keep := range []string{"GET /client-ws?x=1&token=", "Host: a\r\n", "Authorization: " + Redacted + "\r\n", "koe.v1, koe.token." + Redacted} {
		if !strings.Contains(got, keep) {
			t.Errorf("Redact lost %q: %q", keep, got)
		}
	}
	quoted := Redact(fmt.Sprintf("%q", raw))
	if !strings.Contains(quoted, `Authorization: `+Redacted+`\r\nCookie: `+Redacted+`\r\n`) {
		t.Errorf("an escaped header block lost its line structure: %s", quoted)
	}
	for _, s := range []string{"plain text", "", "a tokenizer error", "monkey business"} {
		if got := Redact(s); got != s {
			t.Errorf("Redact(%q) = %q, want it unchanged", s, got)
		}
	}
}
