package quote

import (
	"regexp"
	"strings"
	"sync"
)

// Redacted stands where a credential was.
const Redacted = "[redacted]"

// credentials finds what carries a secret in text that quotes an HTTP
// request, raw ("\r\n" line ends) or escaped by %q (a backslash, then r or
// n): the value of an Authorization, Proxy-Authorization or Cookie header
// up to its line's end, a token or key in a query, a bearer token wherever
// it appears, and koe's token subprotocol.
var credentials = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(
		`(?i)((?:proxy-)?authorization|cookie|set-cookie|x-api-key|api-key)(\s*:\s*)(?:[^\r\n"\\]|\\[^rn"])*` +
			`|([?&;](?:token|access_token|api_key|apikey|key)=)[^&\s"\\#]*` +
			`|(bearer\s+)[A-Za-z0-9._~+/=-]+` +
			`|(koe\.token\.)[A-Za-z0-9._~-]+`)
})

// Redact replaces every credential in s (see credentials) with Redacted,
// so that s may go to a log or an error body: a malformed request quoted
// there must not hand its token to whoever reads them.
func Redact(s string) string {
	if !mayHoldCredential(s) {
		return s
	}
	return credentials().ReplaceAllStringFunc(s, func(m string) string {
		sub := credentials().FindStringSubmatch(m)
		switch {
		case sub[1] != "":
			return sub[1] + sub[2] + Redacted
		case sub[3] != "":
			return sub[3] + Redacted
		case sub[4] != "":
			return sub[4] + Redacted
		}
		return sub[5] + Redacted
	})
}

// mayHoldCredential is a quick test that lets most text skip the regular
// expression.
func mayHoldCredential(s string) bool {
	l := strings.ToLower(s)
	for _, w := range []string{"auth", "cookie", "key", "token", "bearer"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}
