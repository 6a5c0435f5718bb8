package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"koe/agent"
	"koe/internal/modelhttp"
)

// Embedder embeds texts through one OpenAI-compatible /v1/embeddings
// endpoint (Ollama, llama.cpp server --embeddings, vLLM, OpenAI). It is
// safe for concurrent use.
type Embedder struct {
	cfg    EmbeddingsConfig // zero values replaced by the defaults
	api    *openai.Client
	limits modelhttp.Limits
}

// NewEmbedder builds an embedder for cfg, which should have passed
// Validate; httpClient may be shared (nil: a default client).
func NewEmbedder(cfg EmbeddingsConfig, httpClient *http.Client) *Embedder {
	cfg = cfg.withDefaults()
	limits := modelhttp.Limits{
		ErrorBody: modelhttp.Limit{Bytes: int64(cfg.MaxErrorBytes), Key: "embeddings.max_error_bytes"},
		Body:      modelhttp.Limit{Bytes: int64(cfg.MaxResponseBytes), Key: "embeddings.max_response_bytes"},
	}
	return &Embedder{cfg: cfg, api: apiClient(cfg.BaseURL, cfg.APIKey, httpClient, limits), limits: limits}
}

// Model is the configured embedding model: vectors of different models
// cannot be compared, so stored vectors are kept with its name.
func (e *Embedder) Model() string { return e.cfg.Model }

// Embed returns one L2-normalised vector per text, in order, all of the
// same length. It sends the texts in batches of embeddings.batch, one
// after the other, each within embeddings.timeout. An empty text is the
// caller's mistake: a plain error, before any request. Failures of the
// server are *EmbedError; a cancelled or expired ctx returns ctx's error.
// Nothing is returned for any text when one batch fails.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return e.embed(ctx, texts, e.cfg.Timeout, "embeddings.timeout")
}

// EmbedQuery embeds one question within embeddings.query_timeout, for a
// live turn that ranks by keywords alone when this fails.
func (e *Embedder) EmbedQuery(ctx context.Context, text string) ([]float32, error) {
	vs, err := e.embed(ctx, []string{text}, e.cfg.QueryTimeout, "embeddings.query_timeout")
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

func (e *Embedder) embed(ctx context.Context, texts []string, timeout time.Duration, timeoutKey string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	for i, t := range texts {
		if t == "" {
			return nil, fmt.Errorf("embed: text %d of %d is empty; servers refuse empty input", i, len(texts))
		}
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.cfg.Batch {
		batch := texts[start:min(len(texts), start+e.cfg.Batch)]
		vs, err := e.embedBatch(ctx, batch, timeout, timeoutKey)
		if err != nil {
			return nil, err
		}
		for i, v := range vs {
			if len(out) > 0 && len(v) != len(out[0]) {
				return nil, e.badAnswer(fmt.Sprintf("text %d got %d dimensions and text 0 got %d", start+i, len(v), len(out[0])))
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// embedBatch sends one request and checks its answer.
func (e *Embedder) embedBatch(ctx context.Context, texts []string, timeout time.Duration, timeoutKey string) ([][]float32, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := e.api.CreateEmbeddings(rctx, openai.EmbeddingRequest{Input: texts, Model: openai.EmbeddingModel(e.cfg.Model)})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return nil, e.fail(failure{kind: agent.KindTimeout, detail: fmt.Sprintf("waited %s (%s)", timeout, timeoutKey)}, err)
	case undecodable(err):
		return nil, e.fail(failure{kind: agent.KindEmptyReply, detail: "its answer is not an embedding list: " + err.Error()}, err)
	default:
		return nil, e.fail(classifyFailure(err, agent.KindUnreachable, e.limits.ErrorBody), err)
	}
	vs, problem := vectorsInOrder(resp.Data, len(texts))
	if problem != "" {
		return nil, e.badAnswer(problem)
	}
	return vs, nil
}

func (e *Embedder) fail(f failure, cause error) *EmbedError {
	return &EmbedError{agent.LLMError{Kind: f.kind, BaseURL: e.cfg.BaseURL, Model: e.cfg.Model, Status: f.status, Detail: f.detail, Err: cause}}
}

func (e *Embedder) badAnswer(problem string) *EmbedError {
	return e.fail(failure{kind: agent.KindEmptyReply, detail: problem}, nil)
}

// vectorsInOrder puts an answer's vectors in the order of the n texts sent
// by their index field (servers may finish them out of order), normalised
// to unit length, or says what makes the answer unusable.
func vectorsInOrder(data []openai.Embedding, n int) ([][]float32, string) {
	if len(data) != n {
		return nil, fmt.Sprintf("it sent %d vectors for %d texts", len(data), n)
	}
	out := make([][]float32, n)
	for _, d := range data {
		switch {
		case d.Index < 0 || d.Index >= n:
			return nil, fmt.Sprintf("a vector has index %d, outside 0 to %d", d.Index, n-1)
		case out[d.Index] != nil:
			return nil, fmt.Sprintf("two vectors have index %d", d.Index)
		case len(d.Embedding) == 0:
			return nil, fmt.Sprintf("vector %d has no dimensions", d.Index)
		}
		v, problem := normalised(d.Embedding)
		if problem != "" {
			return nil, fmt.Sprintf("vector %d %s", d.Index, problem)
		}
		out[d.Index] = v
	}
	for i, v := range out {
		if len(v) != len(out[0]) {
			return nil, fmt.Sprintf("vector %d has %d dimensions and vector 0 has %d", i, len(v), len(out[0]))
		}
	}
	return out, ""
}

// normalised is v scaled to unit length (the sum in float64, so that large
// values do not overflow), or what is wrong with v.
func normalised(v []float32) ([]float32, string) {
	var sum float64
	for _, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Sprintf("holds %v", x)
		}
		sum += f * f
	}
	if sum == 0 {
		return nil, "is all zeros"
	}
	norm := math.Sqrt(sum)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / norm)
	}
	return out, ""
}
