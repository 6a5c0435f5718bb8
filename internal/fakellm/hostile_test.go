package fakellm_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"koe/internal/fakellm"
	"koe/internal/fakellm/fakellmtest"
)

// post sends body to path of s and returns the answer, read whole.
func post(t *testing.T, s *fakellm.Server, path, body string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fakellmtest.HangGuard)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(raw)
}

func TestFloodChat(t *testing.T) {
	const size = 300 << 10 // several chunks and a part
	s := fakellmtest.StartWith(t, fakellm.Script(fakellm.Reply{Flood: &fakellm.Flood{
		Status: http.StatusBadGateway, ContentType: "text/html", Head: "<p>", Fill: "ab", Size: size, Tail: "</p>",
	}}))
	resp, body := post(t, s, "/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Content-Type") != "text/html" {
		t.Errorf("status %d, Content-Type %q; want 502 text/html", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	want := "<p>" + strings.Repeat("ab", size/2) + "</p>"
	if body != want {
		t.Errorf("body of %d bytes starting %.20q, want %d bytes", len(body), body, len(want))
	}
	if got := s.Flooded(); got != int64(len(want)) {
		t.Errorf("Flooded() = %d, want %d", got, len(want))
	}
}

func TestFloodEmbeddingsStopsWhenClientLeaves(t *testing.T) {
	s := fakellmtest.Start(t)
	s.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply {
		return fakellm.EmbeddingReply{Flood: &fakellm.Flood{ContentType: "application/json", Fill: "x", Size: 1 << 40}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), fakellmtest.HangGuard)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/embeddings", strings.NewReader(`{"model":"m","input":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// A terabyte is never sent: the flood ends with the client.
	fakellmtest.WaitDisconnect(t, s)
	if got := s.Flooded(); got < 1<<20 || got > 1<<30 {
		t.Errorf("Flooded() = %d, want what the client read and the socket buffers held", got)
	}
}

func TestResetReused(t *testing.T) {
	s := fakellmtest.Start(t)
	s.SetResetReused(true)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	fakellmtest.KeptAlive(t, s, client)

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
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("request on a new connection: %s", resp.Status)
	}
}
