package quote

import (
	"strings"
	"sync"
	"testing"
)

// TestRedactFirstUseConcurrent: credentials is compiled on the first
// Redact of a process, not at start (an idle koe never needs it). Run on
// its own (go test -race -run FirstUse), several goroutines make that first
// call at once; each must get the compiled pattern and redact.
func TestRedactFirstUseConcurrent(t *testing.T) {
	const in = "GET /x?token=s3cret HTTP/1.1\r\nAuthorization: Bearer abc.def\r\n"
	var wg sync.WaitGroup
	out := make([]string, 8)
	for i := range out {
		wg.Go(func() { out[i] = Redact(in) })
	}
	wg.Wait()
	for i, got := range out {
		if strings.Contains(got, "s3cret") || strings.Contains(got, "abc.def") || !strings.Contains(got, Redacted) {
			t.Errorf("goroutine %d: Redact(%q) = %q, want both credentials replaced by %q", i, in, got, Redacted)
		}
	}
}
