package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Client streams chat completions from one OpenAI-compatible server.
type Client struct {
	cfg Config
	api *openai.Client
}

// NewClient builds a client; httpClient may be shared by many sessions so
// that they share one connection pool.
func NewClient(cfg Config, httpClient *http.Client) *Client {
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	if httpClient != nil {
		oc.HTTPClient = httpClient
	}
	return &Client{cfg: cfg, api: openai.NewClientWithConfig(oc)}
}

// Config returns the settings the client was built with.
func (c *Client) Config() Config { return c.cfg }

var errIdle = errors.New("llm idle timeout")

// Stream sends msgs and calls onDelta for every content delta, in order,
// until the reply ends, and returns the usage the server reported (nil if
// it reported none). Cancelling ctx aborts the HTTP request at once, so
// the LLM server sees its connection closed and stops generating.
func (c *Client) Stream(ctx context.Context, msgs []openai.ChatCompletionMessage, onDelta func(string)) (*Usage, error) {
	req := c.request(msgs)
	req.Stream = true
	if c.cfg.StreamUsage {
		req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	var usage *Usage
	err := c.stream(ctx, req, func(resp openai.ChatCompletionStreamResponse) {
		if resp.Usage != nil {
			usage = &Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}
		}
		for _, ch := range resp.Choices {
			if ch.Index == 0 && ch.Delta.Content != "" {
				onDelta(ch.Delta.Content)
			}
		}
	})
	return usage, err
}

// Complete returns a whole (non-streamed) answer; summaries use it.
func (c *Client) Complete(ctx context.Context, msgs []openai.ChatCompletionMessage) (string, *Usage, error) {
	resp, err := c.api.CreateChatCompletion(ctx, c.request(msgs))
	if err != nil {
		return "", nil, c.classify(err, KindUnreachable)
	}
	usage := &Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}
	if len(resp.Choices) == 0 {
		return "", usage, &LLMError{Kind: KindBadRequest, BaseURL: c.cfg.BaseURL, Model: c.cfg.Model, Detail: "the answer had no choices"}
	}
	return resp.Choices[0].Message.Content, usage, nil
}

func (c *Client) request(msgs []openai.ChatCompletionMessage) openai.ChatCompletionRequest {
	req := openai.ChatCompletionRequest{Model: c.cfg.Model, Messages: msgs, MaxTokens: c.cfg.MaxTokens}
	if c.cfg.Temperature != nil {
		req.Temperature = *c.cfg.Temperature
	}
	return req
}

// stream runs a streaming request and hands every chunk to onChunk.
func (c *Client) stream(ctx context.Context, req openai.ChatCompletionRequest, onChunk func(openai.ChatCompletionStreamResponse)) error {
	parent := ctx
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	var idle *time.Timer
	if c.cfg.IdleTimeout > 0 {
		idle = time.AfterFunc(c.cfg.IdleTimeout, func() { cancel(errIdle) })
		defer idle.Stop()
	}
	timedOut := func(err error) error {
		if errors.Is(context.Cause(ctx), errIdle) {
			return &LLMError{Kind: KindTimeout, BaseURL: c.cfg.BaseURL, Model: c.cfg.Model, Err: err}
		}
		return nil
	}

	stream, err := c.api.CreateChatCompletionStream(ctx, req)
	if err != nil {
		if te := timedOut(err); te != nil {
			return te
		}
		return c.classify(err, KindUnreachable)
	}
	defer stream.Close()
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if te := timedOut(err); te != nil {
				return te
			}
			if err := parent.Err(); err != nil {
				return err
			}
			return c.classify(err, KindBrokenStream)
		}
		if idle != nil {
			idle.Reset(c.cfg.IdleTimeout)
		}
		onChunk(resp)
	}
}
