// Package logwatch is a slog handler for tests that wait for a log
// message: an event, not a time.
package logwatch

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// hangGuard bounds every wait: reached, it means a hang, never slowness.
const hangGuard = 60 * time.Second

// Handler logs through t and counts the messages it saw.
type Handler struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	seen   map[string]int
	change chan struct{}
}

// New returns a handler that logs through t, each line after prefix.
func New(t testing.TB, prefix string) *Handler {
	return &Handler{t: t, prefix: prefix, seen: map[string]int{}, change: make(chan struct{})}
}

// Logger is a logger through h.
func (h *Handler) Logger() *slog.Logger { return slog.New(h) }

func (h *Handler) Enabled(context.Context, slog.Level) bool { return true }

func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	var attrs []string
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a.String()); return true })
	h.t.Logf("%s %s: %s %s", h.prefix, r.Level, r.Message, strings.Join(attrs, " "))
	h.mu.Lock()
	h.seen[r.Message]++
	close(h.change)
	h.change = make(chan struct{})
	h.mu.Unlock()
	return nil
}

func (h *Handler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *Handler) WithGroup(string) slog.Handler      { return h }

// Count is how many times message has been logged.
func (h *Handler) Count(message string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[message]
}

// WaitFor waits until message has been logged n times in all.
func (h *Handler) WaitFor(message string, n int) {
	h.t.Helper()
	deadline := time.After(hangGuard)
	for {
		h.mu.Lock()
		got, ch := h.seen[message], h.change
		h.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("%s: %q not logged %d times within %s", h.prefix, message, n, hangGuard)
		}
	}
}

// WaitUntil waits until ok holds, asking again after each message logged:
// for a state that one of several paths may bring about, each of which
// logs when it is done.
func (h *Handler) WaitUntil(what string, ok func() bool) {
	h.t.Helper()
	deadline := time.After(hangGuard)
	for {
		h.mu.Lock()
		ch := h.change
		h.mu.Unlock()
		if ok() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("%s: %s not true within %s", h.prefix, what, hangGuard)
		}
	}
}
