package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"koe/agent"
	"koe/internal/modelhttp"
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
	f := classifyFailure(err, kindIfUnknown, c.limits.ErrorBody)
	return &agent.LLMError{Kind: f.kind, BaseURL: c.cfg.BaseURL, Model: c.cfg.Model, Status: f.status, Detail: f.detail, Err: err}
}

// failure is a failed request to an OpenAI-compatible server, sorted: the
// chat and the embeddings clients each word it for their own settings.
type failure struct {
	kind   agent.ErrorKind
	status int    // HTTP status, when the server sent one
	detail string // what the server said, or what the client saw
}

// quotedErrorChars is the most of a server's error message an error
// quotes: a person reads the start, and the whole goes into a frame and a
// log line.
const quotedErrorChars = 300

// classifyFailure sorts whatever go-openai or net/http returned by what a
// person can do about it. errorBody is the limit error bodies were read
// with.
func classifyFailure(err error, kindIfUnknown agent.ErrorKind, errorBody modelhttp.Limit) failure {
	var f failure
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var netErr net.Error
	var tooLarge *modelhttp.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return failure{kind: agent.KindTooLarge, detail: tooLarge.Error()}
	case errors.As(err, &apiErr):
		f.status, f.detail = apiErr.HTTPStatusCode, quote.Shorten(apiErr.Message, quotedErrorChars)
	case errors.As(err, &reqErr):
		f.status = reqErr.HTTPStatusCode
		// Not an OpenAI-style error body: often a proxy's HTML page, so
		// quote only its start.
		f.detail = quote.Shorten(strings.TrimSpace(string(reqErr.Body)), quotedErrorChars) + errorBody.CutNote(reqErr.Body)
	case errors.As(err, &netErr) && netErr.Timeout():
		return failure{kind: agent.KindTimeout, detail: err.Error()}
	}
	switch {
	case f.status == http.StatusUnauthorized || f.status == http.StatusForbidden:
		f.kind = agent.KindUnauthorized
	case f.status == http.StatusNotFound:
		f.kind = agent.KindNotFound
	case f.status == http.StatusTooManyRequests:
		f.kind = agent.KindRateLimited
	case f.status >= 500:
		f.kind = agent.KindServer
	case f.status >= 400:
		f.kind = agent.KindBadRequest
	default:
		var opErr *net.OpError
		var dnsErr *net.DNSError
		if errors.As(err, &opErr) || errors.As(err, &dnsErr) {
			f.kind = agent.KindUnreachable
		} else {
			f.kind = kindIfUnknown
		}
		// A stream's error event is an error of this kind, with the
		// server's message in it.
		f.detail = quote.Shorten(err.Error(), quotedErrorChars)
	}
	return f
}

// undecodable reports whether err is a 200 answer that was not the JSON
// asked for: a web page, or another API at that URL. An error status whose
// body is not JSON is not that: go-openai wraps the JSON error in it too.
func undecodable(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var reqErr *openai.RequestError
	return !errors.As(err, &reqErr) && (errors.As(err, &syntax) || errors.As(err, &typ))
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
