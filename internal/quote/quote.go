// Package quote cuts text from other programs (a server's error page, a
// recogniser's log) down to what an error message can carry.
package quote

// Shorten cuts s to at most n bytes plus an ellipsis, never inside a UTF-8
// sequence.
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
