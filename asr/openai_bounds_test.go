package asr

import (
	"net/http"
	"strings"
	"testing"

	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

// What koe reads of a transcription server is bounded: a transcript's
// answer by asr.openai.max_response_bytes, an error answer by
// asr.openai.max_error_bytes. Either way the error is short and names
// the key.
func TestOpenAIHugeAnswers(t *testing.T) {
	floods := []*fakellm.Flood{
		{ContentType: "application/json", Head: `{"text":"`, Fill: "la ", Size: 64 << 20, Tail: `"}`},
		{Status: http.StatusBadGateway, ContentType: "text/html", Head: "<html>", Fill: "Bad Gateway ", Size: 5 << 20},
	}
	for _, tc := range []struct {
		flood      *fakellm.Flood
		key        string
		limit      int64
		wantInText string
	}{
		{floods[0], "asr.openai.max_response_bytes", DefaultMaxTranscriptBytes, "sent more than koe reads"},
		{floods[1], "asr.openai.max_error_bytes", 4096, "HTTP 502"},
	} {
		s := fakellmtest.Start(t)
		s.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
			return fakellm.TranscriptionReply{Flood: tc.flood}
		})
		hc, read := fakellmtest.CountingClient(t)
		e, err := New(openAIConfig(s.URL()), hc)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Transcribe(asrCtx(t), utterance)
		if err == nil {
			t.Fatalf("%s: no error", tc.key)
		}
		if msg := err.Error(); len(msg) > 600 || !strings.Contains(msg, tc.key) || !strings.Contains(msg, tc.wantInText) {
			t.Errorf("%s: error of %d bytes: %.700s", tc.key, len(msg), msg)
		}
		if got := read.Load(); got > tc.limit+64<<10 {
			t.Errorf("%s: koe read %d bytes; the limit is %d", tc.key, got, tc.limit)
		}
	}
}

func TestOpenAIReadLimitsValidated(t *testing.T) {
	for _, tc := range []struct {
		set  func(*OpenAIConfig)
		want string
	}{
		{func(c *OpenAIConfig) { c.MaxResponseBytes = 1000 }, "asr.openai.max_response_bytes 1000 is too small: at least 4096 bytes"},
		{func(c *OpenAIConfig) { c.MaxErrorBytes = -1 }, "asr.openai.max_error_bytes -1 is too small"},
	} {
		cfg := openAIConfig("http://127.0.0.1:8000/v1")
		tc.set(&cfg.OpenAI)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
}
