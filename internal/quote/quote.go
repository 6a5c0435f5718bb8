// Package quote writes values into messages for people: text from other
// programs (a server's error page, a recogniser's log) cut down to what an
// error message can carry, sizes and counts.
package quote

import "fmt"

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

// Bytes writes n bytes for people: 2 MB, 512 KB, 1.5 KB, 100 bytes (units
// of 1024, as the limits in koe's configuration are written).
func Bytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// Thousands writes n with thousands separators: 6,400.
func Thousands(n int) string {
	if n < 0 {
		return "-" + Thousands(-n)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
