package fakellm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

func embedReq(input ...string) openai.EmbeddingRequest {
	return openai.EmbeddingRequest{Model: "nomic-embed-text", Input: input}
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// embed asks the server over HTTP and returns the vectors by index.
func embed(t *testing.T, c *openai.Client, req openai.EmbeddingRequest) [][]float32 {
	t.Helper()
	resp, err := c.CreateEmbeddings(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, len(resp.Data))
	for i, d := range resp.Data {
		if d.Index != i || d.Object != "embedding" {
			t.Fatalf("entry %d: index %d object %q", i, d.Index, d.Object)
		}
		out[i] = d.Embedding
	}
	return out
}

// The vectors are a function of the text alone, and texts that share words
// (or word stems) are closer than texts that do not: what ranking tests
// built on the fake rely on.
func TestEmbeddingsDeterministicAndSimilar(t *testing.T) {
	s, c := start(t, nil)
	texts := []string{
		"I love painting landscapes",
		"Landscapes are what I love painting!",
		"The stock market fell sharply today",
		"paint",
		"painting",
		"banana",
	}
	first := embed(t, c, embedReq(texts...))
	again := embed(t, c, embedReq(texts...))
	if !reflect.DeepEqual(first, again) {
		t.Fatal("the same texts got different vectors")
	}
	for i, v := range first {
		if len(v) != EmbeddingDim {
			t.Fatalf("vector %d has %d dimensions, want %d", i, len(v), EmbeddingDim)
		}
		if !reflect.DeepEqual(v, EmbeddingVector(texts[i], EmbeddingDim)) {
			t.Errorf("vector %d over HTTP differs from EmbeddingVector", i)
		}
	}
	// One text alone gets the vector it gets among others.
	if alone := embed(t, c, embedReq(texts[2])); !reflect.DeepEqual(alone[0], first[2]) {
		t.Error("a text's vector depends on the other texts of the request")
	}
	if same, other := cosine(first[0], first[1]), cosine(first[0], first[2]); other >= same {
		t.Errorf("cos(same words) = %.3f, cos(other words) = %.3f: want the rephrasing closest", same, other)
	}
	if stem, other := cosine(first[3], first[4]), cosine(first[4], first[5]); stem <= other || stem == 0 {
		t.Errorf("cos(paint, painting) = %.3f, cos(painting, banana) = %.3f: want the shared stem closer", stem, other)
	}
	got := s.EmbeddingRequests()
	if len(got) != 3 || !reflect.DeepEqual(got[0].Input, texts) || got[0].Model != "nomic-embed-text" || len(got[2].Input) != 1 {
		t.Errorf("recorded %+v", got)
	}
}

// A text without letters still gets a vector a client can normalise.
func TestEmbeddingVectorNeverZero(t *testing.T) {
	for _, text := range []string{"!!!", " ", "…", "a"} {
		nonzero := false
		for _, x := range EmbeddingVector(text, 8) {
			nonzero = nonzero || x != 0
		}
		if !nonzero {
			t.Errorf("EmbeddingVector(%q) is all zeros", text)
		}
	}
}

func TestEmbeddingsDimAndBase64(t *testing.T) {
	s, c := start(t, nil)
	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply { return EmbeddingReply{Dim: 7} })
	plain := embed(t, c, embedReq("seven dimensions", "more words here"))
	req := embedReq("seven dimensions", "more words here")
	req.EncodingFormat = openai.EmbeddingEncodingFormatBase64
	packed := embed(t, c, req)
	if len(plain[0]) != 7 || !reflect.DeepEqual(plain, packed) {
		t.Errorf("float %v, base64 %v: want the same 7-long vectors", plain, packed)
	}
	if got := s.EmbeddingRequests(); len(got) != 2 || got[1].EncodingFormat != "base64" {
		t.Errorf("recorded %+v", got)
	}
}

// The answers a client must refuse or repair, on request.
func TestEmbeddingsBrokenAnswers(t *testing.T) {
	s, c := start(t, nil)
	texts := []string{"one", "two", "three"}

	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply { return EmbeddingReply{Missing: 1} })
	if got := embed(t, c, embedReq(texts...)); len(got) != 2 {
		t.Errorf("Missing 1: %d vectors, want 2", len(got))
	}

	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply { return EmbeddingReply{Reverse: true} })
	resp, err := c.CreateEmbeddings(testCtx(t), embedReq(texts...))
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range resp.Data {
		if want := len(texts) - 1 - i; d.Index != want || !reflect.DeepEqual(d.Embedding, EmbeddingVector(texts[want], EmbeddingDim)) {
			t.Errorf("Reverse: entry %d has index %d, want %d with its text's vector", i, d.Index, want)
		}
	}

	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply { return EmbeddingReply{Indexes: []int{0, 0, 5}} })
	if resp, err = c.CreateEmbeddings(testCtx(t), embedReq(texts...)); err != nil || resp.Data[1].Index != 0 || resp.Data[2].Index != 5 {
		t.Errorf("Indexes: %+v, %v", resp.Data, err)
	}

	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply { return EmbeddingReply{Vectors: [][]float32{{1, 2}, {}, {3}}} })
	if got := embed(t, c, embedReq(texts...)); !reflect.DeepEqual(got, [][]float32{{1, 2}, {}, {3}}) {
		t.Errorf("Vectors: %v", got)
	}

	// JSON has no NaN: the fake says so rather than send something else.
	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply {
		return EmbeddingReply{Vectors: [][]float32{{float32(math.NaN())}}}
	})
	var apiErr *openai.APIError
	if _, err := c.CreateEmbeddings(testCtx(t), embedReq("x")); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || !strings.Contains(apiErr.Message, "base64") {
		t.Errorf("NaN as JSON: %v", err)
	}
	nan := embedReq("x")
	nan.EncodingFormat = openai.EmbeddingEncodingFormatBase64
	if got := embed(t, c, nan); len(got) != 1 || !math.IsNaN(float64(got[0][0])) {
		t.Errorf("NaN as base64: %v", got)
	}

	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply {
		return EmbeddingReply{Status: http.StatusNotFound, ErrorMessage: `model "nomic-embed-text" not found, try pulling it first`}
	})
	if _, err := c.CreateEmbeddings(testCtx(t), embedReq("x")); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 404 || !strings.Contains(apiErr.Message, "try pulling") {
		t.Errorf("404: %v", err)
	}
	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply { return EmbeddingReply{Status: http.StatusServiceUnavailable} })
	if _, err := c.CreateEmbeddings(testCtx(t), embedReq("x")); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 503 {
		t.Errorf("503: %v", err)
	}
	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply {
		return EmbeddingReply{Body: "<html>hi</html>", ContentType: "text/html"}
	})
	if _, err := c.CreateEmbeddings(testCtx(t), embedReq("x")); err == nil {
		t.Error("an HTML page decoded as embeddings")
	}

	s.SetEmbeddings(nil)
	if got := embed(t, c, embedReq("back")); len(got) != 1 || len(got[0]) != EmbeddingDim {
		t.Errorf("after SetEmbeddings(nil): %v", got)
	}
}

// Hang holds the request until the client leaves, which the server
// reports; a hanging request does not hold up Close.
func TestEmbeddingsHang(t *testing.T) {
	s, c := start(t, nil)
	asked := make(chan struct{}, 2)
	s.SetEmbeddings(func(EmbeddingRequest) EmbeddingReply {
		asked <- struct{}{}
		return EmbeddingReply{Hang: true}
	})
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.CreateEmbeddings(ctx, embedReq("wait"))
		done <- err
	}()
	waitAsked(t, asked)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	waitDisconnect(t, s)
	waitIdle(t, s)

	go func() {
		_, err := c.CreateEmbeddings(testCtx(t), embedReq("wait"))
		done <- err
	}()
	waitAsked(t, asked)
	closeWhileHanging(t, s, "embedding")
	if err := <-done; err == nil {
		t.Error("a request cut off by Close succeeded")
	}
}

func waitAsked(t *testing.T, asked <-chan struct{}) {
	t.Helper()
	select {
	case <-asked:
	case <-time.After(guard):
		t.Fatal("the request never reached the responder (hang guard)")
	}
}

// Requests OpenAI would refuse are refused the same way, and not recorded.
func TestEmbeddingsBadRequests(t *testing.T) {
	s, _ := start(t, nil)
	for body, want := range map[string]string{
		`{"input":"x"}`:                                      "model parameter",
		`{"model":"m"}`:                                      "input parameter",
		`{"model":"m","input":[]}`:                           "empty array",
		`{"model":"m","input":["a",""]}`:                     "input[1]",
		`{"model":"m","input":""}`:                           "input[0]",
		`{"model":"m","input":[[1,2,3]]}`:                    "token inputs",
		`{"model":"m","input":"x","encoding_format":"int8"}`: "encoding_format",
		`not json`: "parse the JSON",
	} {
		resp, err := http.Post(s.URL()+"/embeddings", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e apiError
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(raw, &e) != nil || !strings.Contains(e.Error.Message, want) {
			t.Errorf("%s: %d %s, want 400 mentioning %q", body, resp.StatusCode, raw, want)
		}
	}
	if n := len(s.EmbeddingRequests()); n != 0 {
		t.Errorf("%d refused requests recorded", n)
	}
}

func TestEmbeddingsRecordingOff(t *testing.T) {
	s, c := start(t, nil)
	embed(t, c, embedReq("kept"))
	s.SetRecording(false)
	embed(t, c, embedReq("not kept"))
	if n := len(s.EmbeddingRequests()); n != 0 {
		t.Errorf("%d requests recorded with recording off", n)
	}
}
