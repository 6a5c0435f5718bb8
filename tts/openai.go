package tts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// openAIPCMRate is the sample rate of OpenAI's "pcm" response format, which
// carries no header to say so.
const openAIPCMRate = 24000

// openAISpeech calls POST {base_url}/audio/speech on any OpenAI-compatible
// server.
type openAISpeech struct {
	client *openai.Client
	cfg    OpenAIConfig
}

func newOpenAI(c OpenAIConfig, httpClient *http.Client) *openAISpeech {
	oc := openai.DefaultConfig(c.APIKey)
	oc.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if httpClient != nil {
		oc.HTTPClient = httpClient
	}
	return &openAISpeech{client: openai.NewClientWithConfig(oc), cfg: c}
}

func (o *openAISpeech) Synthesize(ctx context.Context, text string) (Audio, error) {
	if strings.TrimSpace(text) == "" {
		return Audio{}, errEmptyText
	}
	resp, err := o.client.CreateSpeech(ctx, openai.CreateSpeechRequest{
		Model:          openai.SpeechModel(o.cfg.Model),
		Input:          text,
		Voice:          openai.SpeechVoice(o.cfg.Voice),
		ResponseFormat: openai.SpeechResponseFormat(o.cfg.Format),
		Speed:          o.cfg.Speed,
	})
	if ctxErr := ctx.Err(); ctxErr != nil {
		if err == nil {
			resp.Close()
		}
		return Audio{}, fmt.Errorf("tts: speech request to %s: %w", o.cfg.BaseURL, ctxErr)
	}
	if err != nil {
		return Audio{}, o.describe(err)
	}
	defer resp.Close()
	// The request's context also governs the body: a cancel during the
	// read aborts it.
	body, err := io.ReadAll(io.LimitReader(resp, maxAudioBytes+1))
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Audio{}, fmt.Errorf("tts: speech request to %s: %w", o.cfg.BaseURL, ctxErr)
	}
	if err != nil {
		return Audio{}, fmt.Errorf("tts: the speech server at %s broke off its answer: %w", o.cfg.BaseURL, err)
	}
	if len(body) > maxAudioBytes {
		return Audio{}, fmt.Errorf("tts: the speech server at %s sent more than %d MB of audio for %d characters of text", o.cfg.BaseURL, maxAudioBytes>>20, len(text))
	}
	var a Audio
	if o.cfg.Format == "pcm" {
		a, err = FromPCM16LE(body, openAIPCMRate)
	} else {
		a, err = Normalize(body)
	}
	if err != nil {
		return Audio{}, fmt.Errorf("tts: the speech server at %s answered with audio koe cannot read (Content-Type %q, %d bytes, tts.openai.format %q): %w",
			o.cfg.BaseURL, resp.Header().Get("Content-Type"), len(body), o.cfg.Format, err)
	}
	return a, nil
}

// describe turns a failed request into an error a person can act on: which
// server, what it said, what to set. go-openai's error stays wrapped for
// errors.As.
func (o *openAISpeech) describe(err error) error {
	status, detail := 0, ""
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status, detail = apiErr.HTTPStatusCode, apiErr.Message
	case errors.As(err, &reqErr):
		// Not an OpenAI-style error body: often a proxy's HTML page, so
		// quote only its start.
		status, detail = reqErr.HTTPStatusCode, truncate(strings.TrimSpace(string(reqErr.Body)), 200)
	}
	if detail != "" {
		detail = ": " + detail
	}
	base := o.cfg.BaseURL
	var msg string
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		msg = fmt.Sprintf("the speech server at %s rejected the API key (HTTP %d%s). Set tts.openai.api_key", base, status, detail)
	case status == http.StatusNotFound:
		msg = fmt.Sprintf("the speech server at %s does not know model %q or the endpoint (HTTP 404%s). Set tts.openai.model to a model it serves, and check that tts.openai.base_url ends in /v1", base, o.cfg.Model, detail)
	case status == http.StatusTooManyRequests:
		msg = fmt.Sprintf("the speech server at %s is rate limiting koe (HTTP 429%s). Wait a moment, or raise your quota", base, detail)
	case status >= 500:
		msg = fmt.Sprintf("the speech server at %s failed (HTTP %d%s). Check its logs", base, status, detail)
	case status >= 400:
		msg = fmt.Sprintf("the speech server at %s refused the request (HTTP %d%s). Check tts.openai.model (%q), voice (%q), speed (%g) and format (%q)", base, status, detail, o.cfg.Model, o.cfg.Voice, o.cfg.Speed, o.cfg.Format)
	case isUnreachable(err):
		msg = fmt.Sprintf("cannot reach the speech server at %s (%v). Start it, or set tts.openai.base_url", base, err)
	default:
		msg = fmt.Sprintf("the speech request to %s failed (%v)", base, err)
	}
	return &speechError{msg: "tts: " + msg, err: err}
}

func isUnreachable(err error) bool {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr)
}

// speechError carries a message written for people while keeping the
// underlying error for errors.Is/As. It is a type rather than fmt.Errorf's
// "%w" because go-openai's own message repeats the status and may hold a
// whole HTML error page; the message here quotes only what helps.
type speechError struct {
	msg string
	err error
}

func (e *speechError) Error() string { return e.msg }
func (e *speechError) Unwrap() error { return e.err }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	// Do not split a UTF-8 sequence.
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
