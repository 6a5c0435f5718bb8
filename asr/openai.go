package asr

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"koe/internal/modelhttp"
	"koe/internal/openaicompat"
)

// openAITranscriber calls POST {base_url}/audio/transcriptions on any
// OpenAI-compatible server.
type openAITranscriber struct {
	client *openaicompat.Client
	cfg    OpenAIConfig
	server openaicompat.Endpoint
}

func newOpenAI(c OpenAIConfig, httpClient *http.Client) *openAITranscriber {
	limits := modelhttp.Limits{
		ErrorBody: modelhttp.Limit{Bytes: int64(c.MaxErrorBytes), Key: "asr.openai.max_error_bytes"},
		Body:      modelhttp.Limit{Bytes: int64(c.MaxResponseBytes), Key: "asr.openai.max_response_bytes"},
	}
	if limits.ErrorBody.Bytes == 0 {
		limits.ErrorBody.Bytes = openaicompat.DefaultMaxErrorBytes
	}
	if limits.Body.Bytes == 0 {
		limits.Body.Bytes = DefaultMaxTranscriptBytes
	}
	return &openAITranscriber{
		client: openaicompat.NewClient(c.BaseURL, c.APIKey, httpClient, limits),
		cfg:    c,
		server: openaicompat.Endpoint{
			Prefix:   "asr",
			Server:   "transcription",
			Settings: "asr.openai",
			BaseURL:  c.BaseURL,
			Model:    c.Model,
			Check:    fmt.Sprintf("asr.openai.model (%q) and language (%q)", c.Model, c.Language),
			Payload:  "the recording",
			TooLarge: "Lower the maximum utterance length",

			ErrorBody: limits.ErrorBody,
		},
	}
}

func (o *openAITranscriber) Transcribe(ctx context.Context, wav []byte) (string, error) {
	if len(wav) == 0 {
		return "", ErrNoAudio
	}
	text, err := o.client.Transcribe(ctx, openaicompat.TranscriptionRequest{
		Model:    o.cfg.Model,
		WAV:      wav,
		Language: o.cfg.Language,
		Prompt:   o.cfg.Prompt,
	})
	if ctxErr := ctx.Err(); ctxErr != nil {
		return "", o.server.Aborted(ctxErr)
	}
	if err != nil {
		return "", o.server.Describe(err)
	}
	return strings.TrimSpace(text), nil
}
