package tts

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"koe/internal/modelhttp"
	"koe/internal/openaicompat"
)

// openAIPCMRate is the sample rate of OpenAI's "pcm" response format, which
// carries no header to say so.
const openAIPCMRate = 24000

// openAISpeech calls POST {base_url}/audio/speech on any OpenAI-compatible
// server.
type openAISpeech struct {
	client *openaicompat.Client
	cfg    OpenAIConfig
	server openaicompat.Endpoint
}

func newOpenAI(c OpenAIConfig, httpClient *http.Client) *openAISpeech {
	errorBody := modelhttp.Limit{Bytes: int64(c.MaxErrorBytes), Key: "tts.openai.max_error_bytes"}
	if errorBody.Bytes == 0 {
		errorBody.Bytes = openaicompat.DefaultMaxErrorBytes
	}
	return &openAISpeech{
		// The audio is read within maxAudioBytes by Synthesize.
		client: openaicompat.NewClient(c.BaseURL, c.APIKey, httpClient, modelhttp.Limits{ErrorBody: errorBody}),
		cfg:    c,
		server: openaicompat.Endpoint{
			Prefix:   "tts",
			Server:   "speech",
			Settings: "tts.openai",
			BaseURL:  c.BaseURL,
			Model:    c.Model,
			Check:    fmt.Sprintf("tts.openai.model (%q), voice (%q), speed (%g) and format (%q)", c.Model, c.Voice, c.Speed, c.Format),

			ErrorBody: errorBody,
		},
	}
}

// ask sends text to the server and returns its answer, whose body the
// caller closes.
func (o *openAISpeech) ask(ctx context.Context, text string) (openaicompat.Speech, error) {
	if strings.TrimSpace(text) == "" {
		return openaicompat.Speech{}, errEmptyText
	}
	resp, err := o.client.Speech(ctx, openaicompat.SpeechRequest{
		Model:  o.cfg.Model,
		Input:  text,
		Voice:  o.cfg.Voice,
		Format: o.cfg.Format,
		Speed:  o.cfg.Speed,
	})
	if ctxErr := ctx.Err(); ctxErr != nil {
		if err == nil {
			resp.Body.Close()
		}
		return openaicompat.Speech{}, o.server.Aborted(ctxErr)
	}
	if err != nil {
		return openaicompat.Speech{}, o.server.Describe(err)
	}
	return resp, nil
}

func (o *openAISpeech) Synthesize(ctx context.Context, text string) (Audio, error) {
	resp, err := o.ask(ctx, text)
	if err != nil {
		return Audio{}, err
	}
	defer resp.Body.Close()
	// The request's context also governs the body: a cancel during the
	// read aborts it.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAudioBytes+1))
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Audio{}, o.server.Aborted(ctxErr)
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
			o.cfg.BaseURL, resp.ContentType, len(body), o.cfg.Format, err)
	}
	return a, nil
}
