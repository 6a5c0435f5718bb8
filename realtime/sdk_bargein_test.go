package realtime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/proctest"
	"koe/testkit/realtimesdk"
)

// Barge-in and truncate from the SDK: the user talks while the reply is
// being made (the model is held after its second sentence), server VAD
// cancels the response, the SDK's client truncates the reply at 1.7 s
// (the first sentence, "One two three four.", is 1.14 s of the fake
// server's speech), and the next turn's model is told only what was
// played.
func TestSDKBargeInAndTruncate(t *testing.T) {
	testkit.External(t, "espeak-ng and pocketsphinx")
	proctest.LookPath(t, "pocketsphinx_continuous", "pocketsphinx")
	release := make(chan struct{})
	held := fakellm.Reply{Tokens: fakellm.Words(rtaCounting), BeforeChunk: func(i int) {
		if i == 9 { // " ten": "Five six seven eight." is out
			<-release
		}
	}}
	target, llm := sdkKoe(t, fakellm.Script(held, fakellm.Reply{Tokens: fakellm.Words("Okay.")}))
	t.Cleanup(func() { close(release) }) // before the fake server's cleanup waits for its handlers
	speech := rtaPCM16(rtaSpeech(t, rtaSentence, 24000, 300, 1000))
	half := len(speech) / 2 &^ 1
	dir := t.TempDir()
	first, rest := filepath.Join(dir, "first.pcm"), filepath.Join(dir, "rest.pcm")
	if os.WriteFile(first, speech[:half], 0o644) != nil || os.WriteFile(rest, speech[half:], 0o644) != nil {
		t.Fatal("cannot write the speech")
	}
	events := realtimesdk.Run(t, target, "barge-in", realtimesdk.Script{Steps: []realtimesdk.Step{
		realtimesdk.Wait("session.created"),
		realtimesdk.Send(sdkUserText("count to twenty")),
		realtimesdk.Send(map[string]any{"type": "response.create"}),
		realtimesdk.Wait("response.output_audio_transcript.delta"),
		realtimesdk.Wait("response.output_audio_transcript.delta"),
		realtimesdk.Audio(first, 100),
		realtimesdk.Wait("input_audio_buffer.speech_started"),
		realtimesdk.Wait("response.done"),
		realtimesdk.Send(map[string]any{"type": "conversation.item.truncate", "item_id": "${response.output_item.added.item.id}",
			"content_index": 0, "audio_end_ms": 1700}),
		realtimesdk.Wait("conversation.item.truncated"),
		realtimesdk.Audio(rest, 100),
		realtimesdk.Wait("input_audio_buffer.committed"),
		realtimesdk.Wait("response.done"),
	}})
	c := &rtClient{t: t, got: sdkEvents(t, events)}
	done := rtaEvent(t, c, "response.done")
	if done.str("response.status") != "cancelled" || done.str("response.status_details.reason") != "turn_detected" {
		t.Fatalf("the first response: %s", done.raw)
	}
	heard := lastReplyRemembered(llm)
	if !strings.Contains(heard, "One two three four. Five six") || strings.Contains(heard, "seven") {
		t.Fatalf("memory keeps %q of the reply; the client played 1700 ms: \"One two three four. Five six\"", heard)
	}
	sdkGolden(t, "ga", "barge-in", events)
}
