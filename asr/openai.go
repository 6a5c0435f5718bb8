package asr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// openAITranscriber calls POST {base_url}/audio/transcriptions on any
// OpenAI-compatible server.
type openAITranscriber struct {
	client *openai.Client
	cfg    OpenAIConfig
}

func newOpenAI(c OpenAIConfig, httpClient *http.Client) *openAITranscriber {
	oc := openai.DefaultConfig(c.APIKey)
	oc.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if httpClient != nil {
		oc.HTTPClient = httpClient
	}
	return &openAITranscriber{client: openai.NewClientWithConfig(oc), cfg: c}
}

func (o *openAITranscriber) Transcribe(ctx context.Context, wav []byte) (string, error) {
	if len(wav) == 0 {
		return "", ErrNoAudio
	}
	resp, err := o.client.CreateTranscription(ctx, openai.AudioRequest{
		Model: o.cfg.Model,
		// The name only tells the server the container: servers pick
		// the decoder by extension.
		FilePath: "audio.wav",
		Reader:   bytes.NewReader(wav),
		Language: o.cfg.Language,
		Prompt:   o.cfg.Prompt,
		Format:   openai.AudioResponseFormatJSON,
	})
	if ctxErr := ctx.Err(); ctxErr != nil {
		return "", fmt.Errorf("asr: transcription request to %s: %w", o.cfg.BaseURL, ctxErr)
	}
	if err != nil {
		return "", o.describe(err)
	}
	return strings.TrimSpace(resp.Text), nil
}

// describe turns a failed request into an error a person can act on: which
// server, what it said, what to set. go-openai's error stays wrapped for
// errors.As.
func (o *openAITranscriber) describe(err error) error {
	status, detail := 0, ""
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status, detail = apiErr.HTTPStatusCode, apiErr.Message
	case errors.As(err, &reqErr):
		// Not an OpenAI-style error body: often a proxy's HTML page, so
		// quote only its start.
		status, detail = reqErr.HTTPStatusCode, shorten(strings.TrimSpace(string(reqErr.Body)), 200)
	}
	if detail != "" {
		detail = ": " + detail
	}
	base := o.cfg.BaseURL
	var msg string
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		msg = fmt.Sprintf("the transcription server at %s rejected the API key (HTTP %d%s). Set asr.openai.api_key", base, status, detail)
	case status == http.StatusNotFound:
		msg = fmt.Sprintf("the transcription server at %s does not know model %q or the endpoint (HTTP 404%s). Set asr.openai.model to a model it serves, and check that asr.openai.base_url ends in /v1", base, o.cfg.Model, detail)
	case status == http.StatusRequestEntityTooLarge:
		msg = fmt.Sprintf("the transcription server at %s refused the recording as too large (HTTP 413%s). Lower the maximum utterance length", base, detail)
	case status == http.StatusTooManyRequests:
		msg = fmt.Sprintf("the transcription server at %s is rate limiting koe (HTTP 429%s). Wait a moment, or raise your quota", base, detail)
	case status >= 500:
		msg = fmt.Sprintf("the transcription server at %s failed (HTTP %d%s). Check its logs", base, status, detail)
	case status >= 400:
		msg = fmt.Sprintf("the transcription server at %s refused the request (HTTP %d%s). Check asr.openai.model (%q) and language (%q)", base, status, detail, o.cfg.Model, o.cfg.Language)
	case isUnreachable(err):
		msg = fmt.Sprintf("cannot reach the transcription server at %s (%v). Start it, or set asr.openai.base_url", base, err)
	default:
		msg = fmt.Sprintf("the transcription request to %s failed (%v)", base, err)
	}
	return &transcriptionError{msg: "asr: " + msg, err: err}
}

func isUnreachable(err error) bool {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr)
}

// transcriptionError carries a message written for people while keeping
// the underlying error for errors.Is/As. It is a type rather than
// fmt.Errorf's "%w" because go-openai's own message repeats the status and
// may hold a whole HTML error page; the message here quotes only what helps.
type transcriptionError struct {
	msg string
	err error
}

func (e *transcriptionError) Error() string { return e.msg }
func (e *transcriptionError) Unwrap() error { return e.err }

// shorten cuts s to at most n bytes plus an ellipsis, never inside a UTF-8
// sequence.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
