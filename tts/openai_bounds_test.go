package tts

import (
	"net/http"
	"strings"
	"testing"

	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

// A speech server's error answer is read only up to
// tts.openai.max_error_bytes, however long it is, and quoted short.
func TestOpenAIHugeErrorAnswer(t *testing.T) {
	s := fakellmtest.Start(t)
	s.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply {
		return fakellm.SpeechReply{Flood: &fakellm.Flood{
			Status: http.StatusInternalServerError, ContentType: "application/json",
			Head: `{"error":{"message":"`, Fill: "out of memory ", Size: 5 << 20, Tail: `"}}`,
		}}
	})
	hc, read := fakellmtest.CountingClient(t)
	e, err := New(openAIConfig(s.URL()), hc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Synthesize(testCtx(t), "hello")
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if len(msg) > 600 || !strings.Contains(msg, "HTTP 500") || !strings.Contains(msg, "out of memory") || !strings.Contains(msg, "tts.openai.max_error_bytes") {
		t.Errorf("error of %d bytes, want a short one quoting the answer's start and naming tts.openai.max_error_bytes: %.700s", len(msg), msg)
	}
	if got := read.Load(); got > 64<<10 {
		t.Errorf("koe read %d bytes of the error answer", got)
	}
}

func TestOpenAIMaxErrorBytesValidated(t *testing.T) {
	cfg := openAIConfig("http://127.0.0.1:8880/v1")
	cfg.OpenAI.MaxErrorBytes = 100
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "tts.openai.max_error_bytes 100 is too small") {
		t.Errorf("Validate() = %v", err)
	}
	cfg.OpenAI.MaxErrorBytes = 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("0 (the default): %v", err)
	}
}
