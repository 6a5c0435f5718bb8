// Package openaicompat holds what koe's speech engines share in talking to
// OpenAI-compatible HTTP servers (/v1/audio/speech for tts,
// /v1/audio/transcriptions for asr): building the client, and turning its
// failures into errors a person can act on.
package openaicompat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"koe/internal/modelhttp"
	"koe/internal/quote"
)

// Client talks to one OpenAI-compatible audio server. It keeps go-openai's
// types inside this package: tts and asr see only their own.
type Client struct{ api *openai.Client }

// How much of an error answer an audio engine reads unless its
// max_error_bytes says otherwise, and the least that may be set.
const (
	DefaultMaxErrorBytes = 4 << 10
	MinMaxErrorBytes     = 256
)

// NewClient returns a client for the server at baseURL (ending in /v1; a
// trailing slash is tolerated, as people paste URLs with one) that reads
// its answers within limits. httpClient is shared with the rest of koe
// (its connection pool); nil means a default client.
func NewClient(baseURL, apiKey string, httpClient *http.Client, limits modelhttp.Limits) *Client {
	oc := openai.DefaultConfig(apiKey)
	oc.BaseURL = strings.TrimRight(baseURL, "/")
	oc.HTTPClient = modelhttp.NewClient(httpClient, limits)
	return &Client{api: openai.NewClientWithConfig(oc)}
}

// SpeechRequest asks POST /audio/speech for text spoken.
type SpeechRequest struct {
	Model, Voice, Format, Input string
	Speed                       float64
}

// Speech is an answer of /audio/speech; the caller closes Body. Reading
// Body is bound by the request's context.
type Speech struct {
	Body        io.ReadCloser
	ContentType string
}

// Speech asks the server to speak req.Input.
func (c *Client) Speech(ctx context.Context, req SpeechRequest) (Speech, error) {
	resp, err := c.api.CreateSpeech(ctx, openai.CreateSpeechRequest{
		Model:          openai.SpeechModel(req.Model),
		Input:          req.Input,
		Voice:          openai.SpeechVoice(req.Voice),
		ResponseFormat: openai.SpeechResponseFormat(req.Format),
		Speed:          req.Speed,
	})
	if err != nil {
		return Speech{}, err
	}
	return Speech{Body: resp, ContentType: resp.Header().Get("Content-Type")}, nil
}

// TranscriptionRequest asks POST /audio/transcriptions for the text of a
// WAV recording.
type TranscriptionRequest struct {
	Model, Language, Prompt string
	WAV                     []byte
}

// Transcribe returns what the server heard in req.WAV.
func (c *Client) Transcribe(ctx context.Context, req TranscriptionRequest) (string, error) {
	resp, err := c.api.CreateTranscription(ctx, openai.AudioRequest{
		Model: req.Model,
		// The name only tells the server the container: servers pick
		// the decoder by extension.
		FilePath: "audio.wav",
		Reader:   bytes.NewReader(req.WAV),
		Language: req.Language,
		Prompt:   req.Prompt,
		Format:   openai.AudioResponseFormatJSON,
	})
	if err != nil {
		return "", err
	}
	return resp.Text, nil
}

// Endpoint is one configured server, described for error messages.
type Endpoint struct {
	Prefix   string // "asr": starts every message, like the package's other errors
	Server   string // "transcription": messages speak of "the transcription server"
	Settings string // "asr.openai": where api_key, model and base_url are set
	BaseURL  string
	Model    string
	// Check names the settings, with their values, to look at when the
	// server refuses a request for a reason no other advice covers (a 4xx
	// other than 401, 403, 404, 413 and 429).
	Check string
	// Payload and TooLarge, when set, explain HTTP 413: what the server
	// found too large ("the recording") and what to do about it. Without
	// them a 413 is advised on like any other refusal.
	Payload, TooLarge string
	// ErrorBody is the limit the client read error answers with, for the
	// note on one it cut.
	ErrorBody modelhttp.Limit
}

// quotedErrorChars is the most of a server's error message an error
// quotes: the whole goes into a frame and a log line.
const quotedErrorChars = 300

// Aborted is the error for a request the caller's context ended: it names
// the server and wraps the context's error for errors.Is.
func (e Endpoint) Aborted(ctxErr error) error {
	return fmt.Errorf("%s: %s request to %s: %w", e.Prefix, e.Server, e.BaseURL, ctxErr)
}

// Describe turns a failed request into an error a person can act on: which
// server, what it said, what to set. go-openai's error stays wrapped for
// errors.As.
func (e Endpoint) Describe(err error) error {
	status, detail := 0, ""
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var tooLarge *modelhttp.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		msg := fmt.Sprintf("%s: the %s server at %s sent more than koe reads: %v. %s", e.Prefix, e.Server, e.BaseURL, tooLarge, modelhttp.TooLargeAdvice)
		return &describedError{msg: msg, err: err}
	case errors.As(err, &apiErr):
		status, detail = apiErr.HTTPStatusCode, quote.Shorten(apiErr.Message, quotedErrorChars)
	case errors.As(err, &reqErr):
		// Not an OpenAI-style error body: often a proxy's HTML page, so
		// quote only its start.
		status = reqErr.HTTPStatusCode
		detail = quote.Shorten(strings.TrimSpace(string(reqErr.Body)), 200) + e.ErrorBody.CutNote(reqErr.Body)
	}
	if detail != "" {
		detail = ": " + detail
	}
	server := "the " + e.Server + " server at " + e.BaseURL
	var msg string
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		msg = fmt.Sprintf("%s rejected the API key (HTTP %d%s). Set %s.api_key", server, status, detail, e.Settings)
	case status == http.StatusNotFound:
		msg = fmt.Sprintf("%s does not know model %q or the endpoint (HTTP 404%s). Set %s.model to a model it serves, and check that %s.base_url ends in /v1", server, e.Model, detail, e.Settings, e.Settings)
	case status == http.StatusRequestEntityTooLarge && e.TooLarge != "":
		msg = fmt.Sprintf("%s refused %s as too large (HTTP 413%s). %s", server, e.Payload, detail, e.TooLarge)
	case status == http.StatusTooManyRequests:
		msg = fmt.Sprintf("%s is rate limiting koe (HTTP 429%s). Wait a moment, or raise your quota", server, detail)
	case status >= 500:
		msg = fmt.Sprintf("%s failed (HTTP %d%s). Check its logs", server, status, detail)
	case status >= 400:
		msg = fmt.Sprintf("%s refused the request (HTTP %d%s). Check %s", server, status, detail, e.Check)
	case isUnreachable(err):
		msg = fmt.Sprintf("cannot reach %s (%v). Start it, or set %s.base_url", server, err, e.Settings)
	default:
		msg = fmt.Sprintf("the %s request to %s failed (%v)", e.Server, e.BaseURL, err)
	}
	return &describedError{msg: e.Prefix + ": " + msg, err: err}
}

func isUnreachable(err error) bool {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr)
}

// describedError carries a message written for people while keeping the
// underlying error for errors.Is/As. It is a type rather than fmt.Errorf's
// "%w" because go-openai's own message repeats the status and may hold a
// whole HTML error page; the message here quotes only what helps.
type describedError struct {
	msg string
	err error
}

func (e *describedError) Error() string { return e.msg }
func (e *describedError) Unwrap() error { return e.err }
