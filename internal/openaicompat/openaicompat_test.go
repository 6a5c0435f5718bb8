package openaicompat

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

var endpoint = Endpoint{
	Prefix:   "asr",
	Server:   "transcription",
	Settings: "asr.openai",
	BaseURL:  "http://127.0.0.1:8000/v1",
	Model:    "whisper-1",
	Check:    `asr.openai.model ("whisper-1") and language ("de")`,
	Payload:  "the recording",
	TooLarge: "Lower the maximum utterance length",
}

func TestDescribe(t *testing.T) {
	apiErr := func(status int, msg string) error {
		return &openai.APIError{HTTPStatusCode: status, Message: msg}
	}
	page := "<html>" + strings.Repeat("Bad Gateway ", 100) + "</html>"
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apiErr(401, "bad key"), "asr: the transcription server at http://127.0.0.1:8000/v1 rejected the API key (HTTP 401: bad key). Set asr.openai.api_key"},
		{apiErr(404, ""), `asr: the transcription server at http://127.0.0.1:8000/v1 does not know model "whisper-1" or the endpoint (HTTP 404). Set asr.openai.model to a model it serves, and check that asr.openai.base_url ends in /v1`},
		{apiErr(413, ""), "asr: the transcription server at http://127.0.0.1:8000/v1 refused the recording as too large (HTTP 413). Lower the maximum utterance length"},
		{apiErr(429, ""), "asr: the transcription server at http://127.0.0.1:8000/v1 is rate limiting koe (HTTP 429). Wait a moment, or raise your quota"},
		{apiErr(500, "CUDA out of memory"), "asr: the transcription server at http://127.0.0.1:8000/v1 failed (HTTP 500: CUDA out of memory). Check its logs"},
		{apiErr(400, "nope"), `asr: the transcription server at http://127.0.0.1:8000/v1 refused the request (HTTP 400: nope). Check asr.openai.model ("whisper-1") and language ("de")`},
		{&openai.RequestError{HTTPStatusCode: 502, Body: []byte(page)}, "asr: the transcription server at http://127.0.0.1:8000/v1 failed (HTTP 502: " + page[:200] + "…). Check its logs"},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, "asr: cannot reach the transcription server at http://127.0.0.1:8000/v1 (dial: connection refused). Start it, or set asr.openai.base_url"},
		{errors.New("odd"), "asr: the transcription request to http://127.0.0.1:8000/v1 failed (odd)"},
	} {
		got := endpoint.Describe(tc.err)
		if got.Error() != tc.want {
			t.Errorf("Describe(%v)\n got %s\nwant %s", tc.err, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("Describe(%v) does not wrap it", tc.err)
		}
	}
	// Without advice for it, a 413 is a refusal like any other.
	e := endpoint
	e.Payload, e.TooLarge = "", ""
	if got := e.Describe(apiErr(413, "")).Error(); !strings.Contains(got, "refused the request (HTTP 413). Check asr.openai.model") {
		t.Errorf("413 without advice: %s", got)
	}
}

func TestAborted(t *testing.T) {
	err := endpoint.Aborted(context.Canceled)
	if !errors.Is(err, context.Canceled) || err.Error() != "asr: transcription request to http://127.0.0.1:8000/v1: context canceled" {
		t.Errorf("Aborted = %v", err)
	}
}
