package realtime_test

import (
	"strings"
	"testing"

	"koe/testkit/fakellm"
)

// An audio turn: espeak-ng's speech at 24 kHz pcm16 in 100 ms appends,
// under the default server VAD: the speech is detected, committed as the
// user's audio message, transcribed by koe's ASR (the transcript event
// and the LLM's user message say what it heard) and answered with audio.
func TestRealtimeAudioTurn(t *testing.T) {
	addr, llm := rtaAudioKoe(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("A cup of coffee it is.")}))
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime",
		"audio": map[string]any{"input": map[string]any{"transcription": map[string]any{"model": "whisper-1"}}}}})
	c.expect("session.updated")
	c.appendAudio(rtaPCM16(rtaSpeech(t, rtaSentence, 24000, 500, 1000)), 4800)
	done := c.until("response.done")
	if s := done.str("response.status"); s != "completed" {
		t.Fatalf("response %s: %s", s, done.raw)
	}
	tr := rtaEvent(t, c, "conversation.item.input_audio_transcription.completed")
	if rtaHeard(tr.str("transcript")) < 2 {
		t.Errorf("transcript %q holds fewer than two of %v", tr.str("transcript"), rtaKeyWords)
	}
	committed := rtaEvent(t, c, "input_audio_buffer.committed")
	if tr.str("item_id") != committed.str("item_id") || rtaEvent(t, c, "input_audio_buffer.speech_started").str("item_id") != committed.str("item_id") {
		t.Errorf("speech_started, committed and the transcript name different items: %s", c.types())
	}
	reqs := llm.Requests()
	if last := reqs[len(reqs)-1].Messages; !strings.Contains(last[len(last)-1].Content, tr.str("transcript")) {
		t.Errorf("the LLM got %q, not the transcript %q", last[len(last)-1].Content, tr.str("transcript"))
	}
	if n := rtaCount(c, "response.output_audio.delta"); n == 0 {
		t.Errorf("no audio in the answer: %s", c.types())
	}
	rtaGolden(t, "audio_turn", c)
}

// rtaEvent is the first event of type typ read so far.
func rtaEvent(t *testing.T, c *rtClient, typ string) rtEvent {
	t.Helper()
	for _, e := range c.got {
		if e.typ() == typ {
			return e
		}
	}
	t.Fatalf("no %s in %s", typ, c.types())
	return rtEvent{}
}

// rtaCount counts the events of type typ read so far.
func rtaCount(c *rtClient, typ string) int {
	n := 0
	for _, e := range c.got {
		if e.typ() == typ {
			n++
		}
	}
	return n
}
