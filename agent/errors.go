package agent

import (
	"fmt"

	"koe/internal/modelhttp"
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
	// KindReplyTooLong: the reply ran past llm.max_reply_tokens and koe
	// stopped it (a model that never stops would otherwise stream until
	// the client leaves). What was streamed before stays streamed.
	KindReplyTooLong
	// KindEmptyReply: the server answered but sent no text, e.g. it is not
	// an OpenAI-compatible /v1 endpoint (an HTML page, plain text) or its
	// stream held nothing but [DONE].
	KindEmptyReply
	// KindToolsUnsupported: the server or model refused a request because
	// it offered tools (a model without tool support, a server started
	// without its tool-calling options).
	KindToolsUnsupported
	// KindTooManyCycles: the model still called tools in the turn's last
	// allowed LLM call, when it was told to answer.
	KindTooManyCycles
	// KindTooLarge: the server sent more in one piece than a read limit
	// (llm.max_line_bytes…) allows, and koe stopped reading: Detail names
	// the piece and the setting.
	KindTooLarge
	// KindUnofferedTools: the model called tools in a request that
	// offered none (the character's tools are off, or none of their
	// servers is connected).
	KindUnofferedTools
)

// LLMError is an LLM failure with a message a person can act on: which URL,
// which model, what to set. Package llm builds them; callers test them with
// errors.As without knowing the client.
type LLMError struct {
	Kind    ErrorKind
	BaseURL string
	Model   string
	Status  int    // HTTP status, when the server sent one
	Detail  string // what the server said, or what koe saw
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
	case KindReplyTooLong:
		return fmt.Sprintf("the reply from the LLM server at %s ran past llm.max_reply_tokens (%s), so koe stopped it there. Raise llm.max_reply_tokens if replies are meant to be this long; a model that never stops may need another chat template", e.BaseURL, e.Detail)
	case KindEmptyReply:
		return fmt.Sprintf("the LLM server at %s answered but sent no text%s", e.BaseURL, detail)
	case KindTooManyCycles:
		return fmt.Sprintf("model %q kept calling tools instead of answering%s. Raise llm.max_cycles if its tasks need more steps", e.Model, detail)
	case KindUnofferedTools:
		return fmt.Sprintf("model %q called a tool although koe offered it none%s. The character's tools are off (tools.enabled), or none of their MCP servers is connected yet (koe's log says when one is)", e.Model, detail)
	case KindTooLarge:
		return fmt.Sprintf("the LLM server at %s sent more than koe reads%s. %s", e.BaseURL, detail, modelhttp.TooLargeAdvice)
	case KindToolsUnsupported:
		return fmt.Sprintf("the LLM server at %s refused the tools koe offered to model %q%s. Use a model and server that support tool calls, or turn tools off for this character (tools.enabled: [])", e.BaseURL, e.Model, detail)
	}
	return fmt.Sprintf("LLM error at %s%s", e.BaseURL, detail)
}
