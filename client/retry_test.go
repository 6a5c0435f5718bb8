package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"koe/client"
	"koe/protocol"
)

// drainingKoe answers the first refusals turn requests with what a
// draining koe answers (503, Retry-After, "draining": true), then serves
// them; it records every request's path and body.
type drainingKoe struct {
	mu         sync.Mutex
	refusals   int
	retryAfter string
	draining   bool
	paths      []string
	bodies     []string
}

func (d *drainingKoe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	d.paths = append(d.paths, r.URL.Path)
	d.bodies = append(d.bodies, string(body))
	refuse := d.refusals > 0
	if refuse {
		d.refusals--
	}
	d.mu.Unlock()
	if refuse {
		if d.retryAfter != "" {
			w.Header().Set("Retry-After", d.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		if d.draining {
			_, _ = io.WriteString(w, `{"error":"koe is restarting: send the request again","draining":true}`)
		} else {
			_, _ = io.WriteString(w, `{"error":"koe is restarting"}`)
		}
		return
	}
	switch r.URL.Path {
	case "/api/chat/stream":
		sse(w, "data: {\"type\":\"token\",\"content\":\"Hi\"}\n\ndata: {\"type\":\"end\"}\n\n")
	case "/api/chat/invoke":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"ai","content":"Hi"}`)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"histories":[]}`)
	}
}

func (d *drainingKoe) requests() ([]string, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.paths...), append([]string(nil), d.bodies...)
}

func serveDraining(t *testing.T, d *drainingKoe, opts ...client.Option) *client.Client {
	t.Helper()
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A turn refused while koe drains is sent again, the same request each
// time, after the wait koe asked for (capped), and the trace hears of
// each retry.
func TestStreamRetriesWhileDraining(t *testing.T) {
	d := &drainingKoe{refusals: 2, retryAfter: "1", draining: true}
	c := serveDraining(t, d, client.WithRetry(3, 5*time.Millisecond))
	var retries []client.Retry
	ctx := client.WithRetryTrace(guard(t), func(r client.Retry) { retries = append(retries, r) })
	var events []client.Event
	for ev, err := range c.Stream(ctx, protocol.ChatRequest{Message: "Hello", HistoryUID: "h1"}) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		events = append(events, ev)
	}
	if len(events) != 2 || events[0].Token != "Hi" {
		t.Fatalf("events %+v, want the stream served after the refusals", events)
	}
	paths, bodies := d.requests()
	if len(paths) != 3 {
		t.Fatalf("%d requests, want 3 (2 refused, 1 served)", len(paths))
	}
	for i, b := range bodies {
		if b != bodies[0] || paths[i] != "/api/chat/stream" {
			t.Errorf("request %d: %s %q, want the first one again: %q", i, paths[i], b, bodies[0])
		}
	}
	if len(retries) != 2 {
		t.Fatalf("trace heard %d retries, want 2", len(retries))
	}
	for i, r := range retries {
		if r.Attempt != i+1 || r.Wait != 5*time.Millisecond || r.Refusal == nil ||
			!r.Refusal.Draining || r.Refusal.RetryAfter != time.Second || r.Refusal.StatusCode != 503 {
			t.Errorf("retry %d = %+v (refusal %+v), want attempt %d, the wait capped at 5ms, koe's refusal", i, r, r.Refusal, i+1)
		}
	}
}

// Retries are bounded: a koe that keeps refusing gets retries+1 requests
// and the caller its last refusal.
func TestRetriesAreBounded(t *testing.T) {
	d := &drainingKoe{refusals: 100, retryAfter: "2", draining: true}
	c := serveDraining(t, d, client.WithRetry(2, time.Millisecond))
	_, err := c.Invoke(guard(t), protocol.ChatRequest{Message: "Hello"})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || !apiErr.Draining || apiErr.RetryAfter != 2*time.Second {
		t.Fatalf("invoke: %v, want koe's draining refusal", err)
	}
	if paths, _ := d.requests(); len(paths) != 3 {
		t.Fatalf("%d requests, want 3 (the first and 2 retries)", len(paths))
	}

	// WithRetry(0, …) never retries.
	d = &drainingKoe{refusals: 1, retryAfter: "1", draining: true}
	c = serveDraining(t, d, client.WithRetry(0, 0))
	if _, err := c.Invoke(guard(t), protocol.ChatRequest{Message: "Hello"}); !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Fatalf("invoke without retries: %v, want the refusal", err)
	}
	if paths, _ := d.requests(); len(paths) != 1 {
		t.Fatalf("%d requests without retries, want 1", len(paths))
	}
}

// The wait before a retry ends with the request's context.
func TestRetryWaitEndsWithTheContext(t *testing.T) {
	d := &drainingKoe{refusals: 100, retryAfter: "3600", draining: true}
	c := serveDraining(t, d, client.WithRetry(5, time.Hour))
	ctx, cancel := context.WithCancel(guard(t))
	ctx = client.WithRetryTrace(ctx, func(r client.Retry) {
		if r.Wait != time.Hour {
			t.Errorf("wait %s, want Retry-After capped at an hour", r.Wait)
		}
		cancel()
	})
	var streamErr error
	for _, err := range c.Stream(ctx, protocol.ChatRequest{Message: "Hello"}) {
		streamErr = err
	}
	var apiErr *client.APIError
	if !errors.Is(streamErr, context.Canceled) || !errors.As(streamErr, &apiErr) || apiErr.StatusCode != 503 {
		t.Fatalf("stream: %v, want the cancellation and koe's refusal", streamErr)
	}
	if paths, _ := d.requests(); len(paths) != 1 {
		t.Fatalf("%d requests, want 1: the wait was cancelled", len(paths))
	}
}

// What is not a draining koe's refusal of a turn is not sent again: a 503
// that names no wait, and requests other than turns.
func TestNoRetryOtherwise(t *testing.T) {
	d := &drainingKoe{refusals: 1}
	c := serveDraining(t, d, client.WithRetry(3, time.Millisecond))
	var apiErr *client.APIError
	if _, err := c.Invoke(guard(t), protocol.ChatRequest{Message: "Hello"}); !errors.As(err, &apiErr) || apiErr.Draining || apiErr.RetryAfter != 0 {
		t.Fatalf("invoke: %v, want a plain 503", err)
	}
	d = &drainingKoe{refusals: 1, retryAfter: "1", draining: true}
	c = serveDraining(t, d, client.WithRetry(3, time.Millisecond))
	if _, err := c.Histories(guard(t), "koe_default"); !errors.As(err, &apiErr) || !apiErr.Draining {
		t.Fatalf("histories: %v, want the refusal", err)
	}
	if paths, _ := d.requests(); len(paths) != 1 {
		t.Fatalf("%d requests of a history list, want 1", len(paths))
	}
}

// Retry-After as an HTTP date counts too.
func TestRetryAfterDate(t *testing.T) {
	d := &drainingKoe{refusals: 1, retryAfter: time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}
	c := serveDraining(t, d, client.WithRetry(0, 0))
	_, err := c.Invoke(guard(t), protocol.ChatRequest{Message: "Hello"})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.RetryAfter < 50*time.Minute || apiErr.RetryAfter > time.Hour {
		t.Fatalf("invoke: %v (retry after %v), want about an hour", err, apiErr)
	}
}
