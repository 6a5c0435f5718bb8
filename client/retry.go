package client

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// A koe that drains (its instance is being restarted or stopped) refuses
// new turns with 503, a Retry-After header and "draining": true in its
// JSON error. Nothing of such a turn has started, so the client sends it
// again: behind a load balancer the retry reaches another instance, which
// shares the histories. Only turn requests (Stream, Invoke) are retried,
// only on such an answer, a bounded number of times, each wait bounded and
// cut short by the request's context.

// Defaults of WithRetry.
const (
	DefaultRetries      = 4
	DefaultMaxRetryWait = 5 * time.Second
)

// retryWithoutHeader is the wait when koe says it drains but gives no
// Retry-After.
const retryWithoutHeader = time.Second

// WithRetry sets how often a turn koe refused while draining is sent
// again (0: never) and the longest wait before each try, whatever
// Retry-After asks for. The defaults are DefaultRetries and
// DefaultMaxRetryWait.
func WithRetry(retries int, maxWait time.Duration) Option {
	return func(c *Client) {
		c.retries = max(retries, 0)
		if maxWait > 0 {
			c.maxRetryWait = maxWait
		}
	}
}

// Retry is a refused turn about to be sent again.
type Retry struct {
	// Attempt counts the retries of this request, from 1.
	Attempt int
	// Wait is how long the client waits before sending it.
	Wait time.Duration
	// Refusal is koe's answer to the try before.
	Refusal *APIError
}

type retryTraceKey struct{}

// WithRetryTrace returns a context whose turn requests call trace before
// each retry (on the request's goroutine), so that a program can tell its
// user that koe is restarting and the turn is being sent again.
func WithRetryTrace(ctx context.Context, trace func(Retry)) context.Context {
	return context.WithValue(ctx, retryTraceKey{}, trace)
}

// retryable reports whether a refusal says to try again later: a 503
// that names a wait (Retry-After) or says koe drains.
func (e *APIError) retryable() bool {
	return e.StatusCode == http.StatusServiceUnavailable && (e.Draining || e.retryAfterSet)
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
// ok is false when the header is absent or unreadable.
func parseRetryAfter(h string, now time.Time) (d time.Duration, ok bool) {
	if h == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(h); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, 24*3600)) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// retryWait is how long to wait before trying a refused request again.
func (c *Client) retryWait(e *APIError) time.Duration {
	w := e.RetryAfter
	if !e.retryAfterSet {
		w = retryWithoutHeader
	}
	return min(w, c.maxRetryWait)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
