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
// until the reply ends. Cancelling ctx aborts the HTTP request at once, so
// the LLM server sees its connection closed and stops generating.
func (c *Client) Stream(ctx context.Context, msgs []openai.ChatCompletionMessage, onDelta func(string)) error {
	req := openai.ChatCompletionRequest{
		Model:     c.cfg.Model,
		Messages:  msgs,
		Stream:    true,
		MaxTokens: c.cfg.MaxTokens,
	}
	if c.cfg.Temperature != nil {
		req.Temperature = *c.cfg.Temperature
	}

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
		for _, ch := range resp.Choices {
			if ch.Index == 0 && ch.Delta.Content != "" {
				onDelta(ch.Delta.Content)
			}
		}
	}
}
