package realtime_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"koe/testkit/fakellm"
)

// Typed words answered together with a recording that holds no words
// are still answered, and stored: the empty transcription does not end
// the turn when the user wrote something.
func TestRealtimeTypedWithSilentRecording(t *testing.T) {
	addr, llm := rtaFakeASRKoe(t)
	llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		return fakellm.TranscriptionReply{Empty: true}
	})
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	c.send(map[string]any{"type": "conversation.item.create",
		"item": map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Typed words."}}}})
	c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_audio", "audio": base64.StdEncoding.EncodeToString(formatToneBytes())}}}})
	c.send(map[string]any{"type": "response.create"})
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Fatalf("response.done = %s", done.raw)
	}
	reqs := llm.Requests()
	if len(reqs) == 0 {
		t.Fatal("the typed words were not answered")
	}
	if last := reqs[len(reqs)-1].Messages; !strings.HasSuffix(last[len(last)-1].Content, "\nTyped words.") {
		t.Fatalf("the model was asked %q", last[len(last)-1].Content)
	}
	if msgs := stored(t, addr, 2); !strings.Contains(msgs[0].Content, "Typed words.") {
		t.Fatalf("stored %+v", msgs)
	}
}
