package fakellmtest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"testing"
	"time"

	"koe/testkit/fakellm"
)

// HeadersClient is an HTTP client that notifies headers each time response
// headers arrive: the client is then reading the body, which is where a
// test of a hanging body wants to cancel.
func HeadersClient(t testing.TB, headers chan struct{}) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(r)
		if err == nil {
			Notify(headers)
		}
		return resp, err
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// KeptAlive sends GET /models to s through client and returns once the
// connection is back in client's pool, idle: client's next request to s
// reuses it (the way to meet a server that reset kept-alive connections,
// see fakellm.Server.SetResetReused).
func KeptAlive(t testing.TB, s *fakellm.Server, client *http.Client) {
	t.Helper()
	idle := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{PutIdleConn: func(err error) { idle <- err }})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	select {
	case err := <-idle:
		if err != nil {
			t.Fatalf("the connection was not kept alive: %v", err)
		}
	case <-time.After(HangGuard):
		t.Fatalf("the connection did not return to the pool within %v", HangGuard)
	}
}

// CountingClient is an HTTP client with a pool of its own that counts the
// bytes its answers' bodies hand on, below every limit the client under
// test sets on top of it: what was taken off the network, and so the most
// the client can hold.
func CountingClient(t testing.TB) (*http.Client, *atomic.Int64) {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	var read atomic.Int64
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(r)
		if err == nil {
			resp.Body = &countedBody{ReadCloser: resp.Body, n: &read}
		}
		return resp, err
	})}, &read
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
