// Package llm talks to OpenAI-compatible chat servers (Ollama, llama.cpp,
// vLLM, OpenAI…) for the agent: it is the one place where an
// agent.Request becomes go-openai's wire types and where whatever the
// server or the network did becomes an *agent.LLMError a person can act on.
package llm

import (
	"context"
	"math"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"koe/agent"
	"koe/internal/modelhttp"
)

// Client streams chat completions from one OpenAI-compatible server. It
// implements agent.LLM and is safe for concurrent use.
type Client struct {
	cfg agent.Config
	api *openai.Client
	// limits bound what is read of the server's answers; maxDelta bounds
	// one streamed delta.
	limits   modelhttp.Limits
	maxDelta int
	// tok counts streamed replies against the reply limit.
	tok *agent.Tokenizer
	// startIdle starts a stream's idle clock (startIdleClock; tests put in
	// a clock they fire by hand).
	startIdle func(timeout time.Duration, fire func()) idleTimer
}

var _ agent.LLM = (*Client)(nil)

// New builds a client; httpClient may be shared by many sessions so that
// they share one connection pool (nil: a default client).
func New(cfg agent.Config, httpClient *http.Client) *Client {
	limits := chatLimits(cfg)
	return &Client{
		cfg: cfg, api: apiClient(cfg.BaseURL, cfg.APIKey, httpClient, limits),
		limits: limits, maxDelta: cfg.ReadLimits().Delta,
		tok: agent.NewTokenizer(cfg.Model), startIdle: startIdleClock,
	}
}

// chatLimits bound what the client reads of the chat server's answers.
func chatLimits(cfg agent.Config) modelhttp.Limits {
	l := cfg.ReadLimits()
	return modelhttp.Limits{
		ErrorBody: modelhttp.Limit{Bytes: int64(l.ErrorBody), Key: "llm.max_error_bytes"},
		Line:      modelhttp.Limit{Bytes: int64(l.Line), Key: "llm.max_line_bytes"},
		Body:      modelhttp.Limit{Bytes: int64(l.Response), Key: "llm.max_response_bytes"},
	}
}

// apiClient is go-openai's client for one server, reading its answers
// within limits.
func apiClient(baseURL, apiKey string, httpClient *http.Client, limits modelhttp.Limits) *openai.Client {
	oc := openai.DefaultConfig(apiKey)
	// People paste base URLs with a trailing slash; the paths go-openai
	// appends start with one.
	oc.BaseURL = strings.TrimRight(baseURL, "/")
	oc.HTTPClient = modelhttp.NewClient(httpClient, limits)
	return openai.NewClientWithConfig(oc)
}

// Complete returns a whole (non-streamed) answer; summaries use it.
func (c *Client) Complete(ctx context.Context, req agent.Request) (string, *agent.Usage, error) {
	resp, err := c.api.CreateChatCompletion(ctx, c.chatRequest(req))
	if err != nil {
		if undecodable(err) {
			return "", nil, c.noText(resp.Header(), false, "")
		}
		return "", nil, c.classify(err, agent.KindUnreachable)
	}
	usage := &agent.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}
	if len(resp.Choices) == 0 {
		return "", usage, c.llmError(agent.KindBadRequest, "the answer had no choices")
	}
	return resp.Choices[0].Message.Content, usage, nil
}

// chatRequest is req in go-openai's shape, with the configured model,
// temperature and reply limit.
func (c *Client) chatRequest(req agent.Request) openai.ChatCompletionRequest {
	r := openai.ChatCompletionRequest{Model: c.cfg.Model, Messages: make([]openai.ChatCompletionMessage, len(req.Messages))}
	for i, m := range req.Messages {
		r.Messages[i] = wireMessage(m)
	}
	for _, t := range req.Tools {
		r.Tools = append(r.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters,
		}})
	}
	if req.ToolChoice != "" && len(r.Tools) > 0 {
		r.ToolChoice = req.ToolChoice
	}
	if req.ToolFunction != "" && len(r.Tools) > 0 {
		r.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: req.ToolFunction}}
	}
	if c.cfg.Temperature != nil {
		r.Temperature = *c.cfg.Temperature
	}
	if req.Temperature != nil {
		r.Temperature = *req.Temperature
	}
	if r.Temperature == 0 && (req.Temperature != nil || c.cfg.Temperature != nil) {
		// go-openai leaves a zero temperature out of the request (the
		// server's default, often 0.7, would apply); its documented way
		// to ask for 0 is the smallest float above it.
		r.Temperature = math.SmallestNonzeroFloat32
	}
	if req.JSONSchema != nil {
		r.ResponseFormat = &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name: req.JSONSchema.Name, Schema: req.JSONSchema.Schema, Strict: true,
			},
		}
	}
	limit := c.cfg.ReplyTokenLimit()
	if req.MaxTokens > 0 && (limit == 0 || req.MaxTokens < limit) {
		limit = req.MaxTokens
	}
	//lint:ignore SA1019 max_tokens is the field Ollama, llama.cpp and vLLM read; OpenAI's newer max_completion_tokens is not known to all of them.
	r.MaxTokens = limit
	return r
}

// wireMessage converts one message. Parts become a content array; a
// message without parts keeps its plain string content.
func wireMessage(m agent.WireMessage) openai.ChatCompletionMessage {
	w := openai.ChatCompletionMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
	if len(m.Parts) == 0 {
		w.Content = m.Content
	}
	for _, p := range m.Parts {
		if p.ImageURL == "" {
			w.MultiContent = append(w.MultiContent, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: p.Text})
			continue
		}
		w.MultiContent = append(w.MultiContent, openai.ChatMessagePart{
			Type:     openai.ChatMessagePartTypeImageURL,
			ImageURL: &openai.ChatMessageImageURL{URL: p.ImageURL, Detail: openai.ImageURLDetail(p.Detail)},
		})
	}
	for _, tc := range m.ToolCalls {
		w.ToolCalls = append(w.ToolCalls, openai.ToolCall{
			ID:       tc.ID,
			Type:     openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
		})
	}
	return w
}
