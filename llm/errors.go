package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"koe/agent"
	"koe/internal/quote"
)

func (c *Client) llmError(kind agent.ErrorKind, detail string) *agent.LLMError {
	return &agent.LLMError{Kind: kind, BaseURL: c.cfg.BaseURL, Model: c.cfg.Model, Detail: detail}
}

// classify turns whatever go-openai or net/http returned into an LLMError.
// Context cancellation is passed through untouched: it is not a failure.
func (c *Client) classify(err error, kindIfUnknown agent.ErrorKind) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	e := &agent.LLMError{BaseURL: c.cfg.BaseURL, Model: c.cfg.Model, Err: err}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var netErr net.Error
	switch {
	case errors.As(err, &apiErr):
		e.Status, e.Detail = apiErr.HTTPStatusCode, apiErr.Message
	case errors.As(err, &reqErr):
		e.Status = reqErr.HTTPStatusCode
		// Not an OpenAI-style error body: often a proxy's HTML page, so
		// quote only its start.
		e.Detail = quote.Shorten(strings.TrimSpace(string(reqErr.Body)), 200)
	case errors.As(err, &netErr) && netErr.Timeout():
		e.Kind, e.Detail = agent.KindTimeout, err.Error()
		return e
	}
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		e.Kind = agent.KindUnauthorized
	case e.Status == http.StatusNotFound:
		e.Kind = agent.KindNotFound
	case e.Status == http.StatusTooManyRequests:
		e.Kind = agent.KindRateLimited
	case e.Status >= 500:
		e.Kind = agent.KindServer
	case e.Status >= 400:
		e.Kind = agent.KindBadRequest
	default:
		var opErr *net.OpError
		var dnsErr *net.DNSError
		if errors.As(err, &opErr) || errors.As(err, &dnsErr) {
			e.Kind = agent.KindUnreachable
		} else {
			e.Kind = kindIfUnknown
		}
		e.Detail = err.Error()
	}
	return e
}

// noText is the error for an answer that held no reply text. If nothing
// in it was a chat completion (parsed false), the URL most likely points
// at something else than an OpenAI-compatible API (a web page, a
// proxy's notice, another service), which the Content-Type often shows.
func (c *Client) noText(header http.Header, parsed bool, finish string) error {
	if parsed {
		return c.llmError(agent.KindEmptyReply, fmt.Sprintf("model %q ended its reply without any text (finish_reason %q)", c.cfg.Model, finish))
	}
	detail := "is llm.base_url an OpenAI-compatible /v1 endpoint?"
	switch ct := header.Get("Content-Type"); {
	case ct == "":
		detail += " Its answer had no Content-Type"
	case !strings.HasPrefix(ct, "text/event-stream") && !strings.HasPrefix(ct, "application/json"):
		detail += fmt.Sprintf(" It answered with Content-Type %q instead of a chat completion", ct)
	default:
		detail += fmt.Sprintf(" Its answer (Content-Type %q) held no chat completion", ct)
	}
	return c.llmError(agent.KindEmptyReply, detail)
}

// requestFailed explains a refused request. A request that offered tools
// and was refused for them (Ollama: "does not support tools"; llama.cpp:
// "tools param requires --jinja flag"; vLLM: "auto" tool choice requires
// --enable-auto-tool-choice) gets one error naming the setting that turns
// tools off, instead of a generic bad request.
func (c *Client) requestFailed(req agent.Request, err error) error {
	var le *agent.LLMError
	if len(req.Tools) == 0 || !errors.As(err, &le) || le.Status < 400 || le.Status == http.StatusUnauthorized ||
		le.Status == http.StatusTooManyRequests || !mentionsTools(le.Detail) {
		return err
	}
	out := *le
	out.Kind = agent.KindToolsUnsupported
	return &out
}

func mentionsTools(detail string) bool {
	d := strings.ToLower(detail)
	return strings.Contains(d, "tool") || strings.Contains(d, "function call")
}
