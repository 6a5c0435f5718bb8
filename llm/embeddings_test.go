package llm_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"koe/agent"
	"koe/llm"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

func embedderFor(s *fakellm.Server, mutate ...func(*llm.EmbeddingsConfig)) *llm.Embedder {
	cfg := llm.EmbeddingsConfig{BaseURL: s.URL(), APIKey: "sk-embed", Model: "nomic-embed-text", Timeout: guard, QueryTimeout: guard}
	for _, m := range mutate {
		m(&cfg)
	}
	return llm.NewEmbedder(cfg, nil)
}

func embedError(t *testing.T, err error) *llm.EmbedError {
	t.Helper()
	if err == nil {
		t.Fatal("Embed succeeded, want an error")
	}
	var ee *llm.EmbedError
	if !errors.As(err, &ee) {
		t.Fatalf("error %v (%T) is not an *llm.EmbedError", err, err)
	}
	return ee
}

func unit(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(sum))
	}
	return out
}

func dot(a, b []float32) float64 {
	var d float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
	}
	return d
}

// 100 texts with a batch of 32 go out as 32, 32, 32 and 4 texts, and come
// back as one unit vector per text, in the order given.
func TestEmbedBatchesInOrder(t *testing.T) {
	s := fakellmtest.Start(t)
	texts := make([]string, 100)
	for i := range texts {
		texts[i] = fmt.Sprintf("note %d about topic%d and word%d", i, i%7, i)
	}
	e := embedderFor(s, func(c *llm.EmbeddingsConfig) { c.Batch = 32 })
	got, err := e.Embed(testCtx(t), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(got), len(texts))
	}
	for i, v := range got {
		if norm := math.Sqrt(dot(v, v)); math.Abs(norm-1) > 1e-5 {
			t.Errorf("vector %d has length %v, want 1", i, norm)
		}
		if want := unit(fakellm.EmbeddingVector(texts[i], fakellm.EmbeddingDim)); !reflect.DeepEqual(v, want) {
			t.Fatalf("vector %d is not text %d's (order lost)", i, i)
		}
	}
	reqs := s.EmbeddingRequests()
	var sizes []int
	var sent []string
	for _, r := range reqs {
		sizes = append(sizes, len(r.Input))
		sent = append(sent, r.Input...)
		if r.Model != "nomic-embed-text" || r.Header.Get("Authorization") != "Bearer sk-embed" {
			t.Errorf("request model %q, authorization %q", r.Model, r.Header.Get("Authorization"))
		}
	}
	if !reflect.DeepEqual(sizes, []int{32, 32, 32, 4}) || !reflect.DeepEqual(sent, texts) {
		t.Errorf("requests of %v texts (in order: %v), want 32, 32, 32, 4", sizes, reflect.DeepEqual(sent, texts))
	}
	if e.Model() != "nomic-embed-text" {
		t.Errorf("Model() = %q", e.Model())
	}
}

// Normalised vectors keep what ranking needs: texts sharing words are
// closer than texts that do not.
func TestEmbedRanks(t *testing.T) {
	s := fakellmtest.Start(t)
	got, err := embedderFor(s).Embed(testCtx(t), []string{"my sister loves painting", "painting is what my sister loves", "the train leaves at noon"})
	if err != nil {
		t.Fatal(err)
	}
	if near, far := dot(got[0], got[1]), dot(got[0], got[2]); near <= far {
		t.Errorf("cos(rephrasing) %.3f <= cos(unrelated) %.3f", near, far)
	}
}

// A server that lists the vectors out of order still has each one matched
// to its text by its index.
func TestEmbedReordersByIndex(t *testing.T) {
	s := fakellmtest.Start(t)
	texts := []string{"alpha", "beta gamma", "delta"}
	want, err := embedderFor(s).Embed(testCtx(t), texts)
	if err != nil {
		t.Fatal(err)
	}
	s.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply { return fakellm.EmbeddingReply{Reverse: true} })
	got, err := embedderFor(s).Embed(testCtx(t), texts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("vectors listed last first were not put back in order")
	}
}

func TestEmbedNothing(t *testing.T) {
	s := fakellmtest.Start(t)
	e := embedderFor(s)
	for _, texts := range [][]string{nil, {}} {
		if got, err := e.Embed(testCtx(t), texts); got != nil || err != nil {
			t.Errorf("Embed(%v) = %v, %v; want nil, nil", texts, got, err)
		}
	}
	if _, err := e.Embed(testCtx(t), []string{"fine", ""}); err == nil || !strings.Contains(err.Error(), "text 1 of 2 is empty") {
		t.Errorf("an empty text: %v", err)
	}
	if n := len(s.EmbeddingRequests()); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

func TestEmbedErrors(t *testing.T) {
	texts := []string{"one", "two", "three"}
	for _, tc := range []struct {
		name   string
		reply  fakellm.EmbeddingReply
		kind   agent.ErrorKind
		status int
		want   []string
	}{
		{"503", fakellm.EmbeddingReply{Status: http.StatusServiceUnavailable, ErrorMessage: "loading model"},
			agent.KindServer, 503, []string{"embeddings server", "failed (HTTP 503): loading model", "logs"}},
		{"model not found", fakellm.EmbeddingReply{Status: http.StatusNotFound, ErrorMessage: `model "nomic-embed-text" not found, try pulling it first`},
			agent.KindNotFound, 404, []string{`does not have model "nomic-embed-text"`, "ollama pull nomic-embed-text", "embeddings.model"}},
		{"401", fakellm.EmbeddingReply{Status: http.StatusUnauthorized, ErrorMessage: "Incorrect API key provided"},
			agent.KindUnauthorized, 401, []string{"rejected the API key (HTTP 401)", "KOE_EMBEDDINGS_API_KEY", "embeddings.api_key"}},
		{"403", fakellm.EmbeddingReply{Status: http.StatusForbidden},
			agent.KindUnauthorized, 403, []string{"HTTP 403", "embeddings.api_key"}},
		{"400", fakellm.EmbeddingReply{Status: http.StatusBadRequest, ErrorMessage: "input is too long"},
			agent.KindBadRequest, 400, []string{"refused", "input is too long", "embeddings.model"}},
		{"429", fakellm.EmbeddingReply{Status: http.StatusTooManyRequests},
			agent.KindRateLimited, 429, []string{"rate limiting", "embeddings.batch"}},
		{"wrong count", fakellm.EmbeddingReply{Missing: 1},
			agent.KindEmptyReply, 0, []string{"sent 2 vectors for 3 texts"}},
		{"duplicate index", fakellm.EmbeddingReply{Indexes: []int{0, 0, 2}},
			agent.KindEmptyReply, 0, []string{"two vectors have index 0"}},
		{"index out of range", fakellm.EmbeddingReply{Indexes: []int{0, 1, 3}},
			agent.KindEmptyReply, 0, []string{"index 3, outside 0 to 2"}},
		{"mismatched dimensions", fakellm.EmbeddingReply{Vectors: [][]float32{{1, 2}, {1, 2}, {1, 2, 3}}},
			agent.KindEmptyReply, 0, []string{"vector 2 has 3 dimensions and vector 0 has 2"}},
		{"zero dimensions", fakellm.EmbeddingReply{Vectors: [][]float32{{1}, {}, {1}}},
			agent.KindEmptyReply, 0, []string{"vector 1 has no dimensions"}},
		{"zero vector", fakellm.EmbeddingReply{Vectors: [][]float32{{1, 0}, {1, 0}, {0, 0}}},
			agent.KindEmptyReply, 0, []string{"vector 2 is all zeros"}},
		{"not an embeddings API", fakellm.EmbeddingReply{Body: "<html>router login</html>", ContentType: "text/html"},
			agent.KindEmptyReply, 0, []string{"not an embedding list", "OpenAI-compatible /v1 endpoint"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakellmtest.Start(t)
			s.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply { return tc.reply })
			got, err := embedderFor(s).Embed(testCtx(t), texts)
			ee := embedError(t, err)
			if got != nil || ee.Kind != tc.kind || ee.Status != tc.status || ee.BaseURL != s.URL() || ee.Model != "nomic-embed-text" {
				t.Errorf("vectors %v, error %+v; want kind %d status %d", got, ee, tc.kind, tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tc.status != 0 {
				if apiErr := (*openai.APIError)(nil); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tc.status {
					t.Errorf("error does not wrap the server's (%v)", errors.Unwrap(err))
				}
			}
		})
	}
}

// A 404 that does not say the model is missing is most often a base URL
// without /v1.
func TestEmbedEndpointNotFound(t *testing.T) {
	s := fakellmtest.Start(t)
	e := embedderFor(s, func(c *llm.EmbeddingsConfig) { c.BaseURL = strings.TrimSuffix(s.URL(), "/v1") })
	ee := embedError(t, func() error { _, err := e.Embed(testCtx(t), []string{"x"}); return err }())
	if ee.Kind != agent.KindNotFound || !strings.Contains(ee.Error(), "ends in /v1") || strings.Contains(ee.Error(), "ollama pull") {
		t.Errorf("error %q (kind %d)", ee, ee.Kind)
	}
}

func TestEmbedUnreachable(t *testing.T) {
	url := closedURL(t)
	_, err := llm.NewEmbedder(llm.EmbeddingsConfig{BaseURL: url, Model: "m"}, nil).Embed(testCtx(t), []string{"x"})
	ee := embedError(t, err)
	if ee.Kind != agent.KindUnreachable || !strings.Contains(err.Error(), "cannot reach the embeddings server at "+url) || !strings.Contains(err.Error(), "embeddings.base_url") {
		t.Errorf("error %q (kind %d)", err, ee.Kind)
	}
}

// Vectors of one call all have one length, also across batches.
func TestEmbedDimensionsChangeBetweenBatches(t *testing.T) {
	s := fakellmtest.Start(t)
	var n atomic.Int32
	s.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply {
		return fakellm.EmbeddingReply{Dim: 8 * int(n.Add(1))}
	})
	_, err := embedderFor(s, func(c *llm.EmbeddingsConfig) { c.Batch = 2 }).Embed(testCtx(t), []string{"a", "b", "c"})
	if ee := embedError(t, err); ee.Kind != agent.KindEmptyReply || !strings.Contains(err.Error(), "text 2 got 16 dimensions and text 0 got 8") {
		t.Errorf("error %q (kind %d)", err, ee.Kind)
	}
}

// A server that never answers costs one timeout, named in the error, and
// the request is abandoned rather than left open.
func TestEmbedTimeout(t *testing.T) {
	for _, query := range []bool{false, true} {
		s := fakellmtest.Start(t)
		s.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply { return fakellm.EmbeddingReply{Hang: true} })
		e := embedderFor(s, func(c *llm.EmbeddingsConfig) { c.Timeout, c.QueryTimeout = 50*time.Millisecond, 40*time.Millisecond })
		var err error
		key := "waited 50ms (embeddings.timeout)"
		if query {
			_, err = e.EmbedQuery(testCtx(t), "where did I park?")
			key = "waited 40ms (embeddings.query_timeout)"
		} else {
			_, err = e.Embed(testCtx(t), []string{"x"})
		}
		ee := embedError(t, err)
		if ee.Kind != agent.KindTimeout || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "did not answer in time") {
			t.Errorf("query %v: error %q (kind %d), want a timeout naming %q", query, err, ee.Kind, key)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("query %v: the timeout does not wrap its cause", query)
		}
		fakellmtest.WaitDisconnect(t, s)
	}
}

func TestEmbedQuery(t *testing.T) {
	s := fakellmtest.Start(t)
	v, err := embedderFor(s).EmbedQuery(testCtx(t), "what do I like to paint?")
	if err != nil {
		t.Fatal(err)
	}
	if want := unit(fakellm.EmbeddingVector("what do I like to paint?", fakellm.EmbeddingDim)); !reflect.DeepEqual(v, want) {
		t.Errorf("EmbedQuery = %v, want %v", v, want)
	}
}

// Cancelling the caller's context returns its error, not an EmbedError,
// and closes the request.
func TestEmbedCancel(t *testing.T) {
	s := fakellmtest.Start(t)
	asked := fakellmtest.Signal()
	s.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply {
		fakellmtest.Notify(asked)
		return fakellm.EmbeddingReply{Hang: true}
	})
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := embedderFor(s).Embed(ctx, []string{"x"})
		done <- err
	}()
	fakellmtest.WaitFor(t, asked, "the embedding request")
	cancel()
	select {
	case err := <-done:
		var ee *llm.EmbedError
		if !errors.Is(err, context.Canceled) || errors.As(err, &ee) {
			t.Errorf("err = %v (%T), want context.Canceled itself", err, err)
		}
	case <-time.After(guard):
		t.Fatal("Embed did not return after its context was cancelled")
	}
	fakellmtest.WaitDisconnect(t, s)

	// Already cancelled: no request at all.
	before := len(s.EmbeddingRequests())
	if _, err := embedderFor(s).Embed(ctx, []string{"y"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before: %v", err)
	}
	if n := len(s.EmbeddingRequests()); n != before {
		t.Errorf("a request was sent with a cancelled context")
	}
}

// Many goroutines share one embedder.
func TestEmbedConcurrent(t *testing.T) {
	s := fakellmtest.Start(t)
	e := embedderFor(s, func(c *llm.EmbeddingsConfig) { c.Batch = 3 })
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			texts := []string{fmt.Sprintf("g%d a", g), "b", "c", "d", fmt.Sprintf("g%d e", g)}
			got, err := e.Embed(testCtx(t), texts)
			if err == nil && !reflect.DeepEqual(got[4], unit(fakellm.EmbeddingVector(texts[4], fakellm.EmbeddingDim))) {
				err = fmt.Errorf("goroutine %d got another text's vector", g)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestEmbeddingsConfigValidate(t *testing.T) {
	ok := llm.EmbeddingsConfig{BaseURL: "http://127.0.0.1:11434/v1", Model: "nomic-embed-text"}
	for _, tc := range []struct {
		name   string
		mutate func(*llm.EmbeddingsConfig)
		want   string
	}{
		{"disabled", func(c *llm.EmbeddingsConfig) { *c = llm.DefaultEmbeddingsConfig() }, ""},
		{"disabled without a model", func(c *llm.EmbeddingsConfig) { c.BaseURL, c.Model = "", "" }, ""},
		{"ollama", func(c *llm.EmbeddingsConfig) {}, ""},
		{"https without a port", func(c *llm.EmbeddingsConfig) { c.BaseURL = "https://api.example/v1" }, ""},
		{"no scheme", func(c *llm.EmbeddingsConfig) { c.BaseURL = "127.0.0.1:11434/v1" }, `embeddings.base_url "127.0.0.1:11434/v1" is not an http(s) URL`},
		{"no port", func(c *llm.EmbeddingsConfig) { c.BaseURL = "http://localhost/v1" }, `embeddings.base_url "http://localhost/v1" names no port`},
		{"no model", func(c *llm.EmbeddingsConfig) { c.Model = "" }, "embeddings.model is empty"},
		{"negative timeout", func(c *llm.EmbeddingsConfig) { c.Timeout = -time.Second }, "embeddings.timeout -1s is negative"},
		{"negative query timeout", func(c *llm.EmbeddingsConfig) { c.QueryTimeout = -time.Second }, "embeddings.query_timeout -1s is negative"},
		{"batch too big", func(c *llm.EmbeddingsConfig) { c.Batch = 2049 }, "embeddings.batch 2049 is out of range: 1 to 2048"},
		{"negative batch, disabled", func(c *llm.EmbeddingsConfig) { c.BaseURL, c.Batch = "", -1 }, "embeddings.batch -1"},
		{"small answers", func(c *llm.EmbeddingsConfig) { c.MaxResponseBytes = 1000 }, "embeddings.max_response_bytes 1000 is too small: at least 65536 bytes"},
		{"negative answers", func(c *llm.EmbeddingsConfig) { c.MaxResponseBytes = -1 }, "embeddings.max_response_bytes -1 is too small"},
		{"small errors", func(c *llm.EmbeddingsConfig) { c.MaxErrorBytes = 100 }, "embeddings.max_error_bytes 100 is too small: at least 256 bytes"},
		{"answer and error limits", func(c *llm.EmbeddingsConfig) { c.MaxResponseBytes, c.MaxErrorBytes = 64<<10, 256 }, ""},
	} {
		cfg := ok
		tc.mutate(&cfg)
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	d := llm.DefaultEmbeddingsConfig()
	if d.Enabled() || d.Timeout != 30*time.Second || d.QueryTimeout != 500*time.Millisecond || d.Batch != 32 ||
		d.MaxResponseBytes != 32<<20 || d.MaxErrorBytes != 4096 {
		t.Errorf("defaults %+v", d)
	}
	if !ok.Enabled() {
		t.Error("a base URL does not enable embeddings")
	}
}
