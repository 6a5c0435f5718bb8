package realtime_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// Speech recognition through the fake server (no program from outside):
// a transcript it makes is the message's and the turn's words; one it
// cannot make fails the message's transcription
// (conversation.item.input_audio_transcription.failed) and the response.
func TestRealtimeTranscriptionFromTheEngine(t *testing.T) {
	addr, llm := rtaFakeASRKoe(t)
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{
		"turn_detection": nil, "input_audio_transcription": map[string]any{"model": "gpt-4o-transcribe"}}})
	c.expect("session.updated")
	second := base64.StdEncoding.EncodeToString(formatToneBytes())
	c.send(map[string]any{"type": "input_audio_buffer.append", "audio": second})
	c.send(map[string]any{"type": "input_audio_buffer.commit"})
	item := c.until("input_audio_buffer.committed").str("item_id")
	c.send(map[string]any{"type": "response.create"})
	tr := c.until("conversation.item.input_audio_transcription.completed")
	if tr.str("item_id") != item || tr.str("transcript") != fakellm.DefaultTranscription {
		t.Fatalf("transcription: %s", tr.raw)
	}
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Fatalf("response: %s", done.raw)
	}
	c.send(map[string]any{"type": "conversation.item.retrieve", "item_id": item})
	if got := c.until("conversation.item.retrieved"); got.raw == nil || !containsTranscript(got, fakellm.DefaultTranscription) {
		t.Fatalf("the message does not show its transcript: %s", got.raw)
	}

	llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		return fakellm.TranscriptionReply{Status: 400, ErrorMessage: "the audio is not speech"}
	})
	c.send(map[string]any{"type": "input_audio_buffer.append", "audio": second})
	c.send(map[string]any{"type": "input_audio_buffer.commit"})
	item = c.until("input_audio_buffer.committed").str("item_id")
	c.send(map[string]any{"type": "response.create"})
	failed := c.until("conversation.item.input_audio_transcription.failed")
	if failed.str("item_id") != item || failed.str("error.code") != "asr_failed" || failed.str("error.message") == "" {
		t.Fatalf("failed transcription: %s", failed.raw)
	}
	if done := c.until("response.done"); done.str("response.status") != "failed" {
		t.Fatalf("response after a failed transcription: %s", done.raw)
	}
}

// formatToneBytes is a second of a 24 kHz tone as pcm16.
func formatToneBytes() []byte {
	s := make([]int16, 24000)
	for i := range s {
		s[i] = int16((i%48)*600 - 14400)
	}
	return rtaPCM16(s)
}

func containsTranscript(e rtEvent, text string) bool {
	content, _ := e.at("item.content").([]any)
	for _, p := range content {
		if m, ok := p.(map[string]any); ok && m["transcript"] == text {
			return true
		}
	}
	return false
}

// A user message made with conversation.item.create from audio is heard
// like a committed buffer; one with a transcript is those words; typed
// words waiting with it come first in the turn.
func TestRealtimeAudioItem(t *testing.T) {
	addr, llm := rtaFakeASRKoe(t)
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	audioItem := func(audio, transcript string) map[string]any {
		part := map[string]any{"type": "input_audio", "audio": audio}
		if transcript != "" {
			part["transcript"] = transcript
		}
		return map[string]any{"type": "conversation.item.create", "event_id": "ev_audio",
			"item": map[string]any{"type": "message", "role": "user", "content": []any{part}}}
	}
	c.send(map[string]any{"type": "conversation.item.create",
		"item": map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Listen:"}}}})
	c.send(audioItem(base64.StdEncoding.EncodeToString(formatToneBytes()), ""))
	c.send(map[string]any{"type": "response.create"})
	c.until("response.done")
	reqs := llm.Requests()
	if last := reqs[len(reqs)-1].Messages; !strings.HasSuffix(last[len(last)-1].Content, "\nListen:\n"+fakellm.DefaultTranscription) {
		t.Fatalf("the model was asked %q", last[len(last)-1].Content)
	}
	c.send(audioItem("", "words the client heard"))
	c.send(map[string]any{"type": "response.create"})
	c.until("response.done")
	reqs = llm.Requests()
	if last := reqs[len(reqs)-1].Messages; !strings.HasSuffix(last[len(last)-1].Content, "words the client heard") || strings.Contains(last[len(last)-1].Content, fakellm.DefaultTranscription+"\nwords") {
		t.Fatalf("the model was asked %q", last[len(last)-1].Content)
	}
	c.send(audioItem("not base64!", ""))
	if e := c.until("error"); e.str("error.code") != "invalid_value" || e.str("error.event_id") != "ev_audio" {
		t.Fatalf("bad audio in an item: %s", e.raw)
	}
}

// rtaFakeASRKoe starts a koe that hears through the fake server's
// transcription endpoint and speaks through its speech endpoint, whose
// model echoes: no program from outside koe.
func rtaFakeASRKoe(t *testing.T) (string, *fakellm.Server) {
	t.Helper()
	llm := koetest.StartLLM(t, fakellm.Echo(0))
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), llm.URL()), llm)
	cfg.ASR.Engine = "openai"
	cfg.ASR.OpenAI.BaseURL = llm.URL()
	return rtaKoeWith(t, cfg), llm
}
