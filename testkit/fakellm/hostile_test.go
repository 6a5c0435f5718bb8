package fakellm

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestFloodChat(t *testing.T) {
	const size = 300 << 10 // several chunks and a part
	s, _ := start(t, Script(Reply{Flood: &Flood{
		Status: http.StatusBadGateway, ContentType: "text/html", Head: "<p>", Fill: "ab", Size: size, Tail: "</p>",
	}}))
	status, body, header := postChat(t, s, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusBadGateway || header.Get("Content-Type") != "text/html" {
		t.Errorf("status %d, Content-Type %q; want 502 text/html", status, header.Get("Content-Type"))
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
	s, _ := start(t, nil)
	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply {
		return EmbeddingReply{Flood: &Flood{ContentType: "application/json", Fill: "x", Size: 1 << 40}}
	})
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, s.URL()+"/embeddings", strings.NewReader(`{"model":"m","input":"a"}`))
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
	waitDisconnect(t, s)
	if got := s.Flooded(); got < 1<<20 || got > 1<<30 {
		t.Errorf("Flooded() = %d, want what the client read and the socket buffers held", got)
	}
}
