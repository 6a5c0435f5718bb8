package fakellmtest

import (
	"net/http"
	"testing"
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
