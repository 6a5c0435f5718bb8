package realtime_test

import (
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/testkit/fakellm"
)

// Speech over a written reply cancels it as a response.cancel does: no
// truncate comes for text, so the turn stops at once with what was sent,
// and the speech's own turn follows without waiting for
// conversation.playback_timeout (set far past the test's hang guard).
func TestRealtimeBargeInTextReply(t *testing.T) {
	release := make(chan struct{})
	held := fakellm.Reply{Tokens: fakellm.Words(rtaCounting), BeforeChunk: func(i int) {
		if i == 9 { // " ten": "Five six seven eight." is out
			<-release
		}
	}}
	addr, _ := rtaAudioKoe(t, fakellm.Script(held, fakellm.Reply{Tokens: fakellm.Words("Okay.")}),
		func(c *config.Config) { c.Conversation.PlaybackTimeout = time.Hour })
	t.Cleanup(func() { close(release) })
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	// No response of the speech's own: nothing hurries the cancelled
	// turn's end but its own stop.
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime", "output_modalities": []string{"text"},
		"audio": map[string]any{"input": map[string]any{"turn_detection": map[string]any{"type": "server_vad", "create_response": false, "interrupt_response": true}}}}})
	c.expect("session.updated")
	c.say("count to twenty")
	for n := 0; n < 9; {
		if c.next().typ() == "response.output_text.delta" {
			n++
		}
	}
	c.appendAudio(rtaPCM16(rtaSpeech(t, rtaSentence, 24000, 300, 1000)), 4800)
	c.until("input_audio_buffer.speech_started")
	if done := c.until("response.done"); done.str("response.status") != "cancelled" || done.str("response.status_details.reason") != "turn_detected" {
		t.Fatalf("the reply was not cancelled by the speech: %s", done.raw)
	}
	// The turn ends with what was sent, stored before anything else
	// happens (it waited conversation.playback_timeout for a truncate).
	msgs := stored(t, addr, 2)
	if len(msgs) != 2 || !strings.Contains(msgs[1].Content, "One two three four. Five six seven eight.") || !msgs[1].AdditionalKwargs.Interrupted {
		t.Fatalf("stored %+v, want the written reply as far as it was sent, interrupted", msgs)
	}
	c.until("input_audio_buffer.committed")
	c.send(map[string]any{"type": "response.create"})
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Fatalf("the turn of the speech: %s", done.raw)
	}
}
