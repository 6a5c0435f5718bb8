package fakellmtest_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"koe/testkit/fakellm/fakellmtest"
)

func TestResetReused(t *testing.T) {
	s := fakellmtest.Start(t)
	s.SetResetReused(true)
	client, read := fakellmtest.CountingClient(t)
	fakellmtest.KeptAlive(t, s, client)
	if read.Load() == 0 {
		t.Error("the client counted nothing of the model list")
	}

	// A POST is not sent again by net/http: the reset reaches the client.
	_, err := client.Post(s.URL()+"/embeddings", "application/json", strings.NewReader(`{"model":"m","input":"a"}`))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("request on the kept-alive connection: %v, want connection reset", err)
	}
	if got := s.Resets(); got != 1 {
		t.Errorf("Resets() = %d, want 1", got)
	}
	// A new connection serves its first request.
	resp, err := client.Post(s.URL()+"/embeddings", "application/json", strings.NewReader(`{"model":"m","input":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	before := read.Load()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("request on a new connection: %s", resp.Status)
	}
	if got := read.Load() - before; got != int64(len(body)) {
		t.Errorf("counted %d bytes of a %d-byte answer", got, len(body))
	}
}
