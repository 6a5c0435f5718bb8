// Package modelhttp is the HTTP client koe talks to OpenAI-compatible
// model servers with (chat, embeddings, speech). Such a server may be
// broken or hostile, and go-openai reads what it sends without a bound: an
// error body whole, a stream line up to its newline. So every answer's
// body is bounded here, as it is read, before a byte past the limit is
// handed on. And a request that meets a kept-alive connection the server
// has dropped (it restarted) is sent again on another connection, as long
// as nothing of the answer had arrived.
package modelhttp

import (
	"fmt"
	"net/http"
	"strings"

	"koe/internal/quote"
)

// Limit is one bound on what is read, with the setting that sets it, so
// that an error can name it.
type Limit struct {
	Bytes int64  // 0: no bound
	Key   string // "llm.max_line_bytes"
}

// Limits bound the three kinds of answer a model server gives.
type Limits struct {
	// ErrorBody: an answer with a failure status (below 200, or 400 and
	// up) is read up to this many bytes and then cut, CutMark appended.
	// An error body is only ever shown, so a cut one still serves.
	ErrorBody Limit
	// Line: an event stream (asked for with Accept: text/event-stream)
	// fails once one line runs past this, or once the lines that are not
	// "data:" lines do together: go-openai keeps all of those for a
	// possible error message, for the whole stream.
	Line Limit
	// Body: any other answer fails once it runs past this, whole.
	Body Limit
}

// CutMark ends an error body that was cut at Limits.ErrorBody.
const CutMark = "…"

// Cut reports whether body, an error body read through a client of this
// package, was cut at l.
func (l Limit) Cut(body []byte) bool {
	return l.Bytes > 0 && int64(len(body)) > l.Bytes
}

// CutNote is what an error message adds after quoting body when body was
// cut at l ("" when it was not): the key that would let more be read.
func (l Limit) CutNote(body []byte) string {
	if !l.Cut(body) {
		return ""
	}
	return fmt.Sprintf(" (an error answer of more than %s; koe reads up to %s)", quote.Bytes(l.Bytes), l.Key)
}

// TooLargeAdvice follows a TooLargeError in the messages for people.
const TooLargeAdvice = "A broken or hostile server does this; raise that setting if yours is meant to send this much"

// TooLargeError is an answer that ran past a Limit; reading it stopped
// there.
type TooLargeError struct {
	What  string // "one line of its event stream"
	Limit Limit
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s ran past %s (%s)", e.What, e.Limit.Key, quote.Bytes(e.Limit.Bytes))
}

// NewClient returns base (nil: a default client) with every answer's body
// bounded by l and requests made replayable. base's transport, and so its
// connection pool, is shared, not copied.
func NewClient(base *http.Client, l Limits) *http.Client {
	c := &http.Client{}
	if base != nil {
		*c = *base
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = &transport{next: next, limits: l}
	return c
}

type transport struct {
	next   http.RoundTripper
	limits Limits
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(replayable(req))
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest:
		if t.limits.ErrorBody.Bytes > 0 {
			resp.Body = &cutBody{body: resp.Body, left: t.limits.ErrorBody.Bytes}
			resp.ContentLength = -1
		}
	case acceptsEventStream(req):
		if t.limits.Line.Bytes > 0 {
			resp.Body = &lineBody{body: resp.Body, limit: t.limits.Line}
		}
	default:
		if t.limits.Body.Bytes > 0 {
			resp.Body = &wholeBody{body: resp.Body, limit: t.limits.Body}
		}
	}
	return resp, nil
}

// replayable marks req idempotent for net/http, with an
// X-Idempotency-Key that has no value and so is not sent. net/http then
// sends it again, on another connection, when a kept-alive connection it
// reused fails before the first byte of the answer: the server closed it
// (it restarted, or its keep-alive timeout ran out) as the request went
// out. It never does so once a byte of the answer has arrived, nor for a
// connection dialled for this request, so a reply is never asked for
// twice after any of it was seen. A server that gets the request twice
// this way had not answered the first one.
func replayable(req *http.Request) *http.Request {
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return req
	}
	if _, ok := req.Header["X-Idempotency-Key"]; ok {
		return req
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		// A body that cannot be read again cannot be sent again.
		return req
	}
	r := req.Clone(req.Context())
	r.Header["X-Idempotency-Key"] = nil
	return r
}

func acceptsEventStream(req *http.Request) bool {
	for _, v := range req.Header.Values("Accept") {
		if strings.Contains(v, "text/event-stream") {
			return true
		}
	}
	return false
}

// CheckSetting reports a limit set, in the configuration file's key, to
// fewer bytes than least: an answer a real server sends must fit. 0 means
// the default, def.
func CheckSetting(key string, value, least, def int) error {
	if value != 0 && value < least {
		return fmt.Errorf("%s %d is too small: at least %d bytes (0: the default, %d)", key, value, least, def)
	}
	return nil
}
