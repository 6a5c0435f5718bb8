package realtime_test

import (
	"math"
	"sync/atomic"
	"testing"

	"koe/testkit/fakellm"
)

// rtaBurst is ms of silence and then ms of a 200 Hz tone, 24 kHz pcm16:
// speech enough for the voice detection.
func rtaBurst(silenceMs, toneMs int) []byte {
	s := make([]int16, 24*silenceMs, 24*(silenceMs+toneMs))
	for i := range 24 * toneMs {
		s = append(s, int16(8000*math.Sin(2*math.Pi*200*float64(i)/24000)))
	}
	return rtaPCM16(s)
}

// A user who pauses and goes on while the answer to their first words is
// still being transcribed is heard as one message: the response is
// cancelled (turn_detected) and the next one hears both recordings, as
// /client-ws does with raw audio.
func TestRealtimePauseIsOneMessage(t *testing.T) {
	addr, llm := rtaFakeASRKoe(t)
	hearing := make(chan struct{}, 1)
	var heard atomic.Bool
	llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		if heard.CompareAndSwap(false, true) { // the first words are still being heard when the user goes on
			hearing <- struct{}{}
			return fakellm.TranscriptionReply{Hang: true}
		}
		return fakellm.TranscriptionReply{}
	})
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"input_audio_transcription": map[string]any{"model": "whisper-1"}}})
	c.expect("session.updated")
	c.appendAudio(append(rtaBurst(300, 1000), rtaBurst(800, 0)...), 4800)
	firstItem := c.until("input_audio_buffer.committed").str("item_id")
	c.until("response.created")
	<-hearing
	c.appendAudio(rtaBurst(0, 1000), 4800)
	c.until("input_audio_buffer.speech_started")
	if done := c.until("response.done"); done.str("response.status") != "cancelled" || done.str("response.status_details.reason") != "turn_detected" {
		t.Fatalf("the response to the first words: %s", done.raw)
	}
	c.appendAudio(rtaBurst(800, 0), 4800)
	c.until("input_audio_buffer.committed")
	last := c.until("conversation.item.input_audio_transcription.completed").str("item_id")
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Fatalf("the response to both: %s", done.raw)
	}
	reqs := llm.TranscriptionRequests()
	if len(reqs) != 2 || reqs[1].AudioBytes < reqs[0].AudioBytes+2*16000 {
		t.Fatalf("transcription requests %+v: the second should hold the first's audio and a second more", reqs)
	}
	// The first message was answered with the second: the transcript is
	// the last one's, and none is the first one's alone.
	if last == firstItem {
		t.Fatalf("the transcript is the first message's: %s", c.types())
	}
	for _, e := range c.got {
		if e.typ() == "conversation.item.input_audio_transcription.completed" && e.str("item_id") == firstItem {
			t.Fatalf("the first words were transcribed alone: %s", c.types())
		}
	}
}
