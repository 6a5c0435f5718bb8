package realtime_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"koe/testkit/fakellm"
)

// rtaCounting is a reply of five sentences, five to six seconds of the
// fake server's speech.
const rtaCounting = "One two three four. Five six seven eight. Nine ten eleven twelve. Thirteen fourteen fifteen sixteen. Seventeen eighteen nineteen twenty."

// Barge-in as the API defines it: the user speaks while a reply is
// playing; server VAD cancels the response (response.done, cancelled,
// turn_detected); the client says where its playback stopped
// (conversation.item.truncate) and koe keeps only that much of the reply:
// the next turn's LLM request holds the first sentence and the words of
// the second that played, nothing after. The speech then makes a turn of
// its own.
func TestRealtimeBargeInAndTruncate(t *testing.T) {
	// The model is held after its second sentence: the response is still
	// being made when the user speaks, whatever the machine's speed.
	release := make(chan struct{})
	held := fakellm.Reply{Tokens: fakellm.Words(rtaCounting), BeforeChunk: func(i int) {
		if i == 9 { // " ten": "Five six seven eight." is out
			<-release
		}
	}}
	addr, llm := rtaAudioKoe(t, fakellm.Script(held, fakellm.Reply{Tokens: fakellm.Words("Okay.")}))
	t.Cleanup(func() { close(release) }) // before the fake server's cleanup waits for its handlers
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	c.say("count to twenty")
	for n := 0; n < 2; {
		if c.next().typ() == "response.output_audio_transcript.delta" {
			n++
		}
	}
	// The user starts talking; the client truncates as soon as it hears
	// of it, while the user goes on.
	speech := rtaPCM16(rtaSpeech(t, rtaSentence, 24000, 300, 1000))
	half := len(speech) / 2 &^ 1
	c.appendAudio(speech[:half], 4800)
	c.until("input_audio_buffer.speech_started")
	done := c.until("response.done")
	if done.str("response.status") != "cancelled" || done.str("response.status_details.reason") != "turn_detected" {
		t.Fatalf("the reply was not cancelled by the speech: %s", done.raw)
	}
	// The audio before each sentence's transcript, and in all.
	var sentences []int
	bytes, item := 0, ""
	for _, e := range c.got {
		switch e.typ() {
		case "response.output_audio_transcript.delta":
			sentences = append(sentences, bytes)
			item = e.str("item_id")
		case "response.output_audio.delta":
			bytes += base64.StdEncoding.DecodedLen(len(e.str("delta")))
		}
	}
	if len(sentences) != 2 {
		t.Fatalf("%d sentences sent before the barge-in: %s", len(sentences), c.types())
	}
	sentences = append(sentences, bytes)
	// Played: the first sentence and half of the second (24 kHz pcm16:
	// 48 bytes a millisecond).
	first, second := sentences[1]/48, (sentences[2]-sentences[1])/48
	end := first + second/2
	c.send(map[string]any{"type": "conversation.item.truncate", "item_id": item, "content_index": 0, "audio_end_ms": end})
	tr := c.until("conversation.item.truncated")
	if tr.str("item_id") != item || tr.at("audio_end_ms") != float64(end) {
		t.Fatalf("truncated: %s", tr.raw)
	}
	// The speech goes on to a turn of its own, which remembers what was
	// heard of the reply.
	c.appendAudio(speech[half:], 4800)
	c.until("input_audio_buffer.committed")
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Fatalf("the turn of the speech: %s", done.raw)
	}
	heard := lastReplyRemembered(llm)
	if !strings.Contains(heard, "One two three four. Five six") || strings.Contains(heard, "seven") {
		t.Fatalf("memory keeps %q of the reply; the client played %d ms: \"One two three four. Five six\"", heard, end)
	}
	// A truncate of something that is not the character's audio is an
	// error naming the client's event.
	c.send(map[string]any{"type": "conversation.item.truncate", "event_id": "ev_bad", "item_id": "item_nope", "content_index": 0, "audio_end_ms": 10})
	if e := c.until("error"); e.str("error.code") != "item_not_found" || e.str("error.event_id") != "ev_bad" {
		t.Fatalf("truncating an unknown item: %s", e.raw)
	}
}

// The usual barge-in: koe made and sent the whole reply long before it
// has played (response.done came), and the user talks over its playing.
// No second response.done; the truncate still decides what is kept.
func TestRealtimeBargeInAfterResponseDone(t *testing.T) {
	// Twenty sentences: over twenty seconds of playing, far more than the
	// test takes to speak over it.
	long := strings.Repeat(rtaCounting+" ", 4)
	addr, llm := rtaAudioKoe(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(long)}, fakellm.Reply{Tokens: fakellm.Words("Okay.")}))
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	c.say("count to twenty, four times")
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Fatalf("the reply: %s", done.raw)
	}
	item := rtaEvent(t, c, "response.output_item.added").str("item.id")
	speech := rtaPCM16(rtaSpeech(t, rtaSentence, 24000, 300, 1000))
	half := len(speech) / 2 &^ 1
	c.appendAudio(speech[:half], 4800)
	c.until("input_audio_buffer.speech_started")
	// Played: the first sentence, "One two three four." (1.14 s of the
	// fake server's speech), and not quite half of the second.
	c.send(map[string]any{"type": "conversation.item.truncate", "item_id": item, "content_index": 0, "audio_end_ms": 1700})
	c.until("conversation.item.truncated")
	c.appendAudio(speech[half:], 4800)
	c.until("input_audio_buffer.committed")
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Fatalf("the turn of the speech: %s", done.raw)
	}
	for _, e := range c.got {
		if e.typ() == "response.done" && e.str("response.status") == "cancelled" {
			t.Fatalf("a response was cancelled after it was done: %s", c.types())
		}
	}
	heard := lastReplyRemembered(llm)
	if !strings.Contains(heard, "One two three four. Five") || strings.Contains(heard, "seven") {
		t.Fatalf("memory keeps %q of the reply; the client played 1700 ms", heard)
	}
}

// lastReplyRemembered is the last assistant message of the LLM's newest
// request: what koe's memory kept of the reply before it.
func lastReplyRemembered(llm *fakellm.Server) string {
	reqs := llm.Requests()
	heard := ""
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "assistant" {
			heard = m.Content
		}
	}
	return heard
}
