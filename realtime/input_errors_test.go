package realtime_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// Server VAD with create_response false: the speech is detected and
// committed as a message, and nothing answers it until response.create,
// whose turn hears it.
func TestRealtimeVADWithoutResponse(t *testing.T) {
	addr, llm := rtaAudioKoe(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Heard you.")}))
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime", "audio": map[string]any{"input": map[string]any{
		"turn_detection": map[string]any{"type": "server_vad", "threshold": 0.6, "silence_duration_ms": 400, "create_response": false}}}}})
	up := c.expect("session.updated")
	if td := up.at("session.audio.input.turn_detection"); td == nil || up.at("session.audio.input.turn_detection.create_response") != false ||
		up.at("session.audio.input.turn_detection.prefix_padding_ms") != float64(300) || up.at("session.audio.input.turn_detection.silence_duration_ms") != float64(400) {
		t.Fatalf("turn_detection reported as %v", td)
	}
	c.appendAudio(rtaPCM16(rtaSpeech(t, rtaSentence, 24000, 500, 1000)), 4800)
	started := c.until("input_audio_buffer.speech_started")
	stopped := c.until("input_audio_buffer.speech_stopped")
	committed := c.until("input_audio_buffer.committed")
	c.until("conversation.item.done")
	// The speech starts 500 ms in; the start includes 300 ms of padding
	// and the end 400 ms of silence.
	start, end := started.at("audio_start_ms").(float64), stopped.at("audio_end_ms").(float64)
	if start < 100 || start > 300 || end <= start+1000 || committed.str("item_id") != started.str("item_id") {
		t.Fatalf("started at %v ms, stopped at %v ms: %s", start, end, c.types())
	}
	// Nothing answers; a response.create does.
	c.send(map[string]any{"type": "input_audio_buffer.clear"})
	c.expect("input_audio_buffer.cleared")
	if n := len(llm.Requests()); n != 0 {
		t.Fatalf("%d LLM requests with create_response false", n)
	}
	c.send(map[string]any{"type": "response.create"})
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Fatalf("response: %s", done.raw)
	}
	reqs := llm.Requests()
	if last := reqs[len(reqs)-1].Messages; rtaHeard(last[len(last)-1].Content) < 2 {
		t.Fatalf("the turn did not hear the speech: the LLM got %q", last[len(last)-1].Content)
	}
}

// Bad input is answered with error events naming the client's event,
// and the session goes on: audio that is not base64, a buffer past
// conversation.max_utterance, a commit of too little audio, a
// turn_detection koe cannot do.
func TestRealtimeInputErrors(t *testing.T) {
	llm := koetest.StartLLM(t, fakellm.Echo(0))
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), llm.URL()), llm)
	cfg.Conversation.MaxUtterance = 2 * time.Second
	addr := rtaKoeWith(t, cfg)
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime", "audio": map[string]any{"input": map[string]any{"turn_detection": nil}}}})
	c.expect("session.updated")
	for _, tc := range []struct {
		event      map[string]any
		code, text string
	}{
		{map[string]any{"type": "input_audio_buffer.append", "audio": "not base64!"}, "invalid_value", "audio is not valid base64"},
		{map[string]any{"type": "input_audio_buffer.append"}, "missing_required_parameter", `has no "audio"`},
		{map[string]any{"type": "input_audio_buffer.commit"}, "input_audio_buffer_commit_empty", "holds 0 ms of audio; a commit needs at least 100 ms"},
		{map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(make([]byte, 48000*3))},
			"input_audio_buffer_full", "the input audio buffer is full: it would hold more than 2s of audio (conversation.max_utterance)"},
		{map[string]any{"type": "session.update", "session": map[string]any{"turn_detection": map[string]any{"type": "server_vad", "threshold": 2}}},
			"invalid_value", "turn_detection.threshold must be between 0 and 1, got 2"},
		{map[string]any{"type": "session.update", "session": map[string]any{"turn_detection": map[string]any{"type": "push_to_talk"}}},
			"invalid_value", `turn_detection.type must be server_vad or semantic_vad`},
	} {
		tc.event["event_id"] = "ev_" + tc.code
		c.send(tc.event)
		e := c.until("error")
		if e.str("error.code") != tc.code || !strings.Contains(e.str("error.message"), tc.text) || e.str("error.event_id") != "ev_"+tc.code {
			t.Errorf("%v: %s; want %s saying %q", tc.event["type"], e.raw, tc.code, tc.text)
		}
	}
	// A second and a half of audio still fits, and commits; another one
	// does too, but the two messages would wait for a response with more
	// than the limit between them: the second is refused.
	second := base64.StdEncoding.EncodeToString(make([]byte, 72000))
	c.send(map[string]any{"type": "input_audio_buffer.append", "audio": second})
	c.send(map[string]any{"type": "input_audio_buffer.commit"})
	c.until("input_audio_buffer.committed")
	c.send(map[string]any{"type": "input_audio_buffer.append", "audio": second})
	c.send(map[string]any{"type": "input_audio_buffer.commit"})
	if e := c.until("error"); e.str("error.code") != "input_audio_buffer_full" || !strings.Contains(e.str("error.message"), "waiting for a response would hold more than 2s") {
		t.Fatalf("a second message past the limit: %s", e.raw)
	}
}

// rtaKoeWith starts koe with cfg.
func rtaKoeWith(t *testing.T, cfg config.Config) string {
	t.Helper()
	return koetest.StartKoe(t, cfg).Addr()
}
