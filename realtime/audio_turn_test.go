package realtime_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"koe/testkit"
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
	checkGolden(t, "audio_turn.jsonl", rtaTrace(t, c.got))
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

// The same in G.711 µ-law, committed by hand (turn_detection null): no
// voice detection events, and koe hears exactly the decoded 8 kHz audio
// brought to 16 kHz: its transcript is what pocketsphinx makes of that.
func TestRealtimeULawManualCommit(t *testing.T) {
	addr, _ := rtaAudioKoe(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Sure.")}))
	c := rtDial(t, addr, "", nil, "realtime", "openai-beta.realtime-v1")
	c.expect("session.created")
	c.expect("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{
		"input_audio_format": "g711_ulaw", "output_audio_format": "g711_ulaw", "turn_detection": nil,
		"input_audio_transcription": map[string]any{"model": "whisper-1"}}})
	if up := c.expect("session.updated"); up.at("session.turn_detection") != nil || up.str("session.input_audio_format") != "g711_ulaw" {
		t.Fatalf("session.updated: %s", up.raw)
	}
	speech := rtaSpeech(t, rtaSentence, 8000, 300, 300)
	ulaw := rtaULaw(speech)
	c.appendAudio(ulaw, 1600)
	c.send(map[string]any{"type": "input_audio_buffer.commit", "event_id": "ev_commit"})
	committed := c.until("input_audio_buffer.committed")
	c.send(map[string]any{"type": "response.create"})
	done := c.until("response.done")
	if s := done.str("response.status"); s != "completed" {
		t.Fatalf("response %s: %s", s, done.raw)
	}
	for _, typ := range []string{"input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped"} {
		if rtaCount(c, typ) != 0 {
			t.Fatalf("%s with turn detection off: %s", typ, c.types())
		}
	}
	tr := rtaEvent(t, c, "conversation.item.input_audio_transcription.completed")
	if tr.str("item_id") != committed.str("item_id") {
		t.Fatalf("the transcript is of %s, the commit made %s", tr.str("item_id"), committed.str("item_id"))
	}
	if want := rtaTranscribe(t, rtaULawTo16k(t, ulaw)); tr.str("transcript") != want || want == "" {
		t.Fatalf("koe heard %q; pocketsphinx hears %q in the decoded audio", tr.str("transcript"), want)
	}
	// The answer is µ-law too: a byte a sample at 8 kHz, as long as the
	// fake speech of "Sure.".
	var n int
	for _, e := range c.got {
		if e.typ() == "response.audio.delta" {
			n += base64.StdEncoding.DecodedLen(len(e.str("delta")))
		}
	}
	if want := int(fakellm.SpeechDuration("Sure.", 0).Seconds() * 8000); n < want-8 || n > want+8 {
		t.Fatalf("%d bytes of µ-law audio, want about %d", n, want)
	}
}

// rtaTrace is rtTrace with what the speech recogniser heard and where the
// detector put the speech left out: the tests check those themselves, and
// they change with the Debian packages' versions, not with koe.
func rtaTrace(t *testing.T, events []rtEvent) []byte {
	t.Helper()
	out := make([]rtEvent, len(events))
	for i, e := range events {
		m := map[string]any{}
		for k, v := range e.m {
			m[k] = v
		}
		for _, k := range []string{"audio_start_ms", "audio_end_ms"} {
			if _, ok := m[k]; ok {
				m[k] = "<ms>"
			}
		}
		if e.typ() == "conversation.item.input_audio_transcription.completed" {
			m["transcript"] = "<transcript>"
		}
		out[i] = rtEvent{m: m, raw: e.raw}
	}
	return rtTrace(t, out)
}

// rtaWithoutUsage drops a response's token counts, which count the
// prompt (its date and time, a transcript's words).
func rtaWithoutUsage(v any) any {
	r, ok := v.(map[string]any)
	if !ok || r["usage"] == nil {
		return v
	}
	c := map[string]any{}
	for k, v := range r {
		c[k] = v
	}
	c["usage"] = "<usage>"
	return c
}

// A watcher of the session sees the audio turn as koe's voice turns go:
// the transcript as user-input-transcription, then the user's message
// with those words; one turn, one stream.
func TestRealtimeAudioTurnWatched(t *testing.T) {
	addr, _ := rtaAudioKoe(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Noted.")}))
	c := rtDial(t, addr, "", nil)
	id := c.expect("session.created").str("session.id")
	c.expect("conversation.created")
	w := rtWatcher(t, addr, id)
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime",
		"audio": map[string]any{"input": map[string]any{"transcription": map[string]any{"model": "whisper-1"}}}}})
	c.expect("session.updated")
	c.appendAudio(rtaPCM16(rtaSpeech(t, rtaSentence, 24000, 500, 1000)), 4800)
	c.until("response.done")
	heard := rtaEvent(t, c, "conversation.item.input_audio_transcription.completed").str("transcript")
	_ = w.SetReadDeadline(time.Now().Add(testkit.HangGuard))
	transcribed := ""
	for {
		_, data, err := w.ReadMessage()
		if err != nil {
			t.Fatalf("the watcher saw no human message (transcription %q): %v", transcribed, err)
		}
		var m struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Content struct {
				Type    string `json:"type"`
				Content string `json:"content"`
			} `json:"content"`
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if m.Type == "user-input-transcription" {
			transcribed = m.Text
		}
		if m.Type == "message" && m.Content.Type == "human" {
			if transcribed != heard || m.Content.Content != heard {
				t.Fatalf("the watcher saw %q transcribed and %q said; the client got %q", transcribed, m.Content.Content, heard)
			}
			return
		}
	}
}
