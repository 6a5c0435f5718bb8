package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	openai "github.com/sashabaranov/go-openai"
)

// ErrorKind says what went wrong with the LLM, so callers can react (and
// tests can check) with errors.As instead of matching text.
type ErrorKind int

// Kinds of LLM failure.
const (
	KindUnreachable ErrorKind = iota + 1
	KindUnauthorized
	KindNotFound
	KindRateLimited
	KindServer
	KindBadRequest
	KindBrokenStream
	KindTimeout
)

// LLMError is an LLM failure with a message a person can act on: which URL,
// which model, what to set.
type LLMError struct {
	Kind    ErrorKind
	BaseURL string
	Model   string
	Status  int
	Detail  string
	Err     error
}

func (e *LLMError) Unwrap() error { return e.Err }

func (e *LLMError) Error() string {
	detail := ""
	if e.Detail != "" {
		detail = ": " + e.Detail
	}
	switch e.Kind {
	case KindUnreachable:
		return fmt.Sprintf("cannot reach the LLM server at %s%s. Start it, or point koe at another one with OPENAI_BASE_URL or llm.base_url in conf.yaml", e.BaseURL, detail)
	case KindUnauthorized:
		return fmt.Sprintf("the LLM server at %s rejected the API key (HTTP %d)%s. Set OPENAI_API_KEY or llm.api_key", e.BaseURL, e.Status, detail)
	case KindNotFound:
		return fmt.Sprintf("the LLM server at %s does not know model %q or the endpoint (HTTP %d)%s. Set KOE_LLM_MODEL or llm.model to a model it serves, and check that llm.base_url ends in /v1", e.BaseURL, e.Model, e.Status, detail)
	case KindRateLimited:
		return fmt.Sprintf("the LLM server at %s is rate limiting koe (HTTP 429)%s. Wait a moment and try again, or raise your quota", e.BaseURL, detail)
	case KindServer:
		return fmt.Sprintf("the LLM server at %s failed (HTTP %d)%s. Check its logs; koe will try again on your next message", e.BaseURL, e.Status, detail)
	case KindBadRequest:
		return fmt.Sprintf("the LLM server at %s refused the request for model %q (HTTP %d)%s", e.BaseURL, e.Model, e.Status, detail)
	case KindBrokenStream:
		return fmt.Sprintf("the reply stream from the LLM server at %s broke off%s. Try again", e.BaseURL, detail)
	case KindTimeout:
		return fmt.Sprintf("the LLM server at %s sent nothing for too long%s. It may be overloaded or still loading model %q; raise llm.idle_timeout if it is just slow", e.BaseURL, detail, e.Model)
	}
	return fmt.Sprintf("LLM error at %s%s", e.BaseURL, detail)
}

// classify turns whatever go-openai or net/http returned into an LLMError.
// Context cancellation is passed through untouched: it is not a failure.
func (c *Client) classify(err error, kindIfUnknown ErrorKind) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	e := &LLMError{BaseURL: c.cfg.BaseURL, Model: c.cfg.Model, Err: err}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var netErr net.Error
	switch {
	case errors.As(err, &apiErr):
		e.Status, e.Detail = apiErr.HTTPStatusCode, apiErr.Message
	case errors.As(err, &reqErr):
		e.Status = reqErr.HTTPStatusCode
		e.Detail = truncate(string(reqErr.Body), 200)
	case errors.As(err, &netErr) && netErr.Timeout():
		e.Kind, e.Detail = KindTimeout, err.Error()
		return e
	}
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		e.Kind = KindUnauthorized
	case e.Status == http.StatusNotFound:
		e.Kind = KindNotFound
	case e.Status == http.StatusTooManyRequests:
		e.Kind = KindRateLimited
	case e.Status >= 500:
		e.Kind = KindServer
	case e.Status >= 400:
		e.Kind = KindBadRequest
	default:
		var opErr *net.OpError
		var dnsErr *net.DNSError
		if errors.As(err, &opErr) || errors.As(err, &dnsErr) {
			e.Kind = KindUnreachable
		} else {
			e.Kind = kindIfUnknown
		}
		e.Detail = err.Error()
	}
	return e
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
