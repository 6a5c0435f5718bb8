package realtime

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"koe/asr"
)

// rtaAppendAll appends every chunk and gathers the events.
func rtaAppendAll(t *testing.T, in *Input, chunks []string) []InputEvent {
	t.Helper()
	var all []InputEvent
	for i, c := range chunks {
		evs, err := in.Append(c)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		all = append(all, evs...)
	}
	return all
}

func rtaFormatEvents(evs []InputEvent) string {
	var parts []string
	for _, ev := range evs {
		switch ev.Kind {
		case SpeechStarted:
			parts = append(parts, fmt.Sprintf("started@%d", ev.AudioStartMs))
		case SpeechStopped:
			parts = append(parts, fmt.Sprintf("stopped@%d", ev.AudioEndMs))
		case Committed:
			parts = append(parts, fmt.Sprintf("committed(%dms)", len(ev.Audio)*1000/asr.SampleRate))
		}
	}
	return strings.Join(parts, " ")
}

// TestInputManualCommit: with turn detection off, appended audio in any of
// the formats is heard at 16 kHz, whole, on commit, and only then.
func TestInputManualCommit(t *testing.T) {
	for _, f := range []audioFormat{formatPCM, formatPCMU, formatPCMA} {
		in := NewInput(time.Minute, rtaDefaults)
		in.SetFormat(f)
		tone := rtaTone(f.rate, 1000, -6)
		// 7 ms chunks cut PCM samples in half at 24 kHz (7 × 48 = 336 bytes,
		// but 7 ms at 48 kHz is 672; the cut comes from the odd offsets
		// below).
		b := f.encode(nil, tone)
		var chunks []string
		for i, n := 0, 0; i < len(b); i += n {
			n = min(len(b)-i, f.bytes(7)+1)
			chunks = append(chunks, base64.StdEncoding.EncodeToString(b[i:i+n]))
		}
		if evs := rtaAppendAll(t, in, chunks); len(evs) != 0 {
			t.Fatalf("%s: events before the commit: %s", f.betaName(), rtaFormatEvents(evs))
		}
		evs, err := in.Commit()
		if err != nil || len(evs) != 1 || evs[0].Kind != Committed {
			t.Fatalf("%s: commit gave %s, %v", f.betaName(), rtaFormatEvents(evs), err)
		}
		audio := evs[0].Audio
		if len(audio) < 15990 || len(audio) > 16010 {
			t.Errorf("%s: a second became %d samples at 16 kHz", f.betaName(), len(audio))
		}
		if db := 10 * math.Log10(rtaGoertzel(audio, asr.SampleRate, 150)/rtaGoertzel(audio, asr.SampleRate, 1000)); db < 30 {
			t.Errorf("%s: the 150 Hz fundamental is only %.1f dB over 1 kHz", f.betaName(), db)
		}
		// The buffer is empty again.
		if _, err := in.Commit(); err == nil || !strings.Contains(err.Error(), "holds 0 ms of audio; a commit needs at least 100 ms") {
			t.Errorf("%s: a second commit: %v", f.betaName(), err)
		}
	}
}

func TestInputErrors(t *testing.T) {
	in := NewInput(2*time.Second, rtaDefaults)
	b := formatPCM.encode(nil, rtaTone(24000, 1500, -6))
	if _, err := in.Append(base64.StdEncoding.EncodeToString(b)); err != nil {
		t.Fatal(err)
	}
	// Bad base64 changes nothing.
	for _, bad := range []string{"not base64!", "AAA", "QUJD\x00"} {
		if _, err := in.Append(bad); err == nil || !strings.Contains(err.Error(), "audio is not valid base64") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// Past the limit: refused, the buffer as it was.
	over := base64.StdEncoding.EncodeToString(formatPCM.encode(nil, rtaTone(24000, 600, -6)))
	if _, err := in.Append(over); err == nil || err.Error() != "the input audio buffer is full: it would hold more than 2s of audio (conversation.max_utterance); commit or clear it first" {
		t.Errorf("over the limit: %v", err)
	}
	evs, err := in.Commit()
	if err != nil || len(evs) != 1 || len(evs[0].Audio) != 24000 {
		t.Fatalf("commit: %s, %v", rtaFormatEvents(evs), err)
	}
	// Under the minimum.
	if _, err := in.Append(base64.StdEncoding.EncodeToString(formatPCM.encode(nil, rtaTone(24000, 90, -6)))); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Commit(); err == nil || !strings.Contains(err.Error(), "holds 90 ms") {
		t.Errorf("90 ms: %v", err)
	}
	// Clear drops it.
	in.Clear()
	if _, err := in.Append(over); err != nil {
		t.Fatal(err)
	}
	if evs, err := in.Commit(); err != nil || len(evs[0].Audio) != 9600 {
		t.Fatalf("after clear: %s, %v", rtaFormatEvents(evs), err)
	}
	// With turn detection on, there is nothing to commit until speech.
	in.SetTurnDetection(mustTD(t, `{"type":"server_vad"}`))
	if _, err := in.Append(base64.StdEncoding.EncodeToString(formatPCM.encode(nil, make([]int16, 2400)))); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Commit(); err == nil || !strings.Contains(err.Error(), "holds no speech to commit") {
		t.Errorf("silence under server_vad: %v", err)
	}
}

func mustTD(t *testing.T, s string) *TurnDetection {
	t.Helper()
	td, err := ParseTurnDetection(json.RawMessage(s), rtaDefaults)
	if err != nil || td == nil {
		t.Fatalf("%s: %v", s, err)
	}
	return td
}

// rtaSpeechStream is quiet noise with two bursts of voice:
// 0–1000 noise, 1000–2000 voice, 2000–3500 noise, 3500–4000 voice,
// 4000–5500 noise.
func rtaSpeechStream(rate int) []int16 {
	s := rtaNoise(rate, 5500, -65, 7)
	rtaMix(s, rtaTone(rate, 1000, -12), rate)
	rtaMix(s, rtaTone(rate, 500, -12), rate*7/2)
	return s
}

// TestInputServerVAD: under server_vad the detector reports each burst of
// voice, its start with the prefix padding, its end after the silence,
// and commits what lies between; positions count all the session's
// audio, whatever the format and however it was chunked.
func TestInputServerVAD(t *testing.T) {
	td := `{"type":"server_vad","threshold":0.5,"prefix_padding_ms":300,"silence_duration_ms":500}`
	for _, f := range []audioFormat{formatPCM, formatPCMU, formatPCMA} {
		for _, chunkMs := range []int{20, 133} {
			in := NewInput(time.Minute, rtaDefaults)
			in.SetFormat(f)
			in.SetTurnDetection(mustTD(t, td))
			evs := rtaAppendAll(t, in, rtaChunks(f, f.encode(nil, rtaSpeechStream(f.rate)), chunkMs))
			// Speech counts once it lasted start_ms (100): 1000 - 300 =
			// 700; it stops 500 ms after the last voiced frame.
			want := "started@700 stopped@2500 committed(1800ms) started@3200 stopped@4500 committed(1300ms)"
			if got := rtaFormatEvents(evs); !rtaNear(got, want, 20) {
				t.Errorf("%s in %d ms chunks: %s\nwant about %s", f.betaName(), chunkMs, got, want)
			}
		}
	}
}

// rtaNear compares event strings whose numbers may differ by tol.
func rtaNear(got, want string, tol int) bool {
	g, w := strings.Fields(got), strings.Fields(want)
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		gs, gn := rtaSplitNumber(g[i])
		ws, wn := rtaSplitNumber(w[i])
		if gs != ws || gn-wn > tol || wn-gn > tol {
			return false
		}
	}
	return true
}

// rtaSplitNumber splits "started@700" into "started@" and 700.
func rtaSplitNumber(s string) (string, int) {
	i := strings.IndexAny(s, "0123456789")
	if i < 0 {
		return s, 0
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	n, _ := strconv.Atoi(s[i:j])
	return s[:i] + s[j:], n
}

// TestInputVADCommitAndClear: a commit ends the utterance being heard
// then and there; a clear forgets it; positions still count everything.
func TestInputVADCommitAndClear(t *testing.T) {
	f := formatPCM
	in := NewInput(time.Minute, rtaDefaults)
	in.SetTurnDetection(mustTD(t, `{"type":"server_vad","prefix_padding_ms":300,"silence_duration_ms":500}`))
	stream := f.encode(nil, rtaSpeechStream(f.rate))
	evs := rtaAppendAll(t, in, rtaChunks(f, stream[:f.bytes(1500)], 20))
	if !in.Speaking() || !rtaNear(rtaFormatEvents(evs), "started@700", 20) {
		t.Fatalf("first 1.5 s: %s", rtaFormatEvents(evs))
	}
	evs, err := in.Commit()
	if err != nil || !rtaNear(rtaFormatEvents(evs), "stopped@1500 committed(800ms)", 20) {
		t.Fatalf("commit mid-speech: %s, %v", rtaFormatEvents(evs), err)
	}
	// The detector starts over in the middle of the voice, which it
	// takes for the noise floor: the rest of the burst is not speech.
	evs = rtaAppendAll(t, in, rtaChunks(f, stream[f.bytes(1500):f.bytes(3700)], 20))
	if !rtaNear(rtaFormatEvents(evs), "started@3200", 20) {
		t.Fatalf("1.5 to 3.7 s: %s", rtaFormatEvents(evs))
	}
	// Clearing in the second burst forgets it; the detector, started over
	// in the voice again, does not hear its rest.
	in.Clear()
	if in.Speaking() {
		t.Fatal("still speaking after a clear")
	}
	evs = rtaAppendAll(t, in, rtaChunks(f, stream[f.bytes(3700):], 20))
	if len(evs) != 0 {
		t.Errorf("after the clear: %s", rtaFormatEvents(evs))
	}
	// Switching turn detection off and on keeps counting.
	in.SetTurnDetection(nil)
	if _, err := in.Append(base64.StdEncoding.EncodeToString(stream)); err != nil {
		t.Fatal(err)
	}
	in.SetTurnDetection(mustTD(t, `{"type":"server_vad","prefix_padding_ms":300,"silence_duration_ms":500}`))
	evs = rtaAppendAll(t, in, rtaChunks(f, stream, 20))
	if got := rtaFormatEvents(evs); !rtaNear(got, "started@11700 stopped@13500 committed(1800ms) started@14200 stopped@15500 committed(1300ms)", 20) {
		t.Errorf("third and fourth passes: %s", got)
	}
}

// TestThresholdMapping: a burst 8 dB over steady noise is speech at a low
// threshold and noise at a high one.
func TestThresholdMapping(t *testing.T) {
	const rate = 24000
	s := rtaNoise(rate, 3000, -40, 3)
	// The tone's RMS is its peak level less about 4 dB; -29 dBFS peak
	// puts it about 8 dB over the noise.
	rtaMix(s, rtaTone(rate, 1000, -29), rate)
	for _, c := range []struct {
		threshold float64
		speech    bool
	}{{0.1, true}, {0.9, false}} {
		in := NewInput(time.Minute, rtaDefaults)
		in.SetTurnDetection(mustTD(t, fmt.Sprintf(`{"type":"server_vad","threshold":%v}`, c.threshold)))
		evs := rtaAppendAll(t, in, rtaChunks(formatPCM, formatPCM.encode(nil, s), 20))
		if heard := len(evs) > 0; heard != c.speech {
			t.Errorf("threshold %v: %s", c.threshold, rtaFormatEvents(evs))
		}
	}
}

func TestParseTurnDetection(t *testing.T) {
	if td, err := ParseTurnDetection(json.RawMessage(" null "), rtaDefaults); td != nil || err != nil {
		t.Fatalf("null: %+v, %v", td, err)
	}
	td := mustTD(t, `{"type":"server_vad","create_response":false}`)
	got, _ := json.Marshal(td)
	if want := `{"type":"server_vad","threshold":0.5,"prefix_padding_ms":200,"silence_duration_ms":600,"create_response":false,"interrupt_response":true}`; string(got) != want {
		t.Errorf("defaults:\n%s\nwant\n%s", got, want)
	}
	if td.Creates() || !td.Interrupts() {
		t.Error("create_response false, interrupt_response true by default")
	}
	td = mustTD(t, `{"type":"semantic_vad","eagerness":"high"}`)
	got, _ = json.Marshal(td)
	if want := `{"type":"semantic_vad","eagerness":"high","create_response":true,"interrupt_response":true}`; string(got) != want {
		t.Errorf("semantic:\n%s\nwant\n%s", got, want)
	}
	for _, c := range []struct{ in, err string }{
		{`{"type":"server_vad","threshold":1.5}`, "turn_detection.threshold must be between 0 and 1, got 1.5"},
		{`{"type":"server_vad","prefix_padding_ms":-1}`, "prefix_padding_ms must be between 0 and 5000, got -1"},
		{`{"type":"server_vad","silence_duration_ms":50}`, "silence_duration_ms must be between 100 and 10000, got 50"},
		{`{"type":"server_vad","eagerness":"low"}`, "eagerness is for semantic_vad"},
		{`{"type":"semantic_vad","threshold":0.2}`, "semantic_vad takes eagerness"},
		{`{"type":"semantic_vad","eagerness":"eager"}`, `eagerness must be low, medium, high or auto, got "eager"`},
		{`{"type":"push_to_talk"}`, `turn_detection.type must be server_vad or semantic_vad (or turn_detection null for manual commits), got "push_to_talk"`},
		{`{"type":"server_vad","threshold":"high"}`, "turn_detection: json"},
		{`[]`, "turn_detection: json"},
	} {
		if _, err := ParseTurnDetection(json.RawMessage(c.in), rtaDefaults); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.in, err, c.err)
		}
	}
}

// TestSemanticVADEagerness: eagerness picks the silence that ends the
// turn.
func TestSemanticVADEagerness(t *testing.T) {
	f := formatPCM
	stream := f.encode(nil, rtaSpeechStream(f.rate))
	for eagerness, end := range map[string]int{"high": 2300, "auto": 2600, "low": 3200} {
		in := NewInput(time.Minute, rtaDefaults)
		in.SetTurnDetection(mustTD(t, `{"type":"semantic_vad","eagerness":"`+eagerness+`"}`))
		evs := rtaAppendAll(t, in, rtaChunks(f, stream, 20))
		if len(evs) < 2 || evs[1].Kind != SpeechStopped || evs[1].AudioEndMs < end-20 || evs[1].AudioEndMs > end+20 {
			t.Errorf("%s: %s; want the first stop at about %d", eagerness, rtaFormatEvents(evs), end)
		}
	}
}

// FuzzInputAppend appends any string in each format, manual and with
// server VAD: no panic; bad base64 is an error naming it and good base64
// is taken (under the limit); events come in the order started, stopped,
// committed.
func FuzzInputAppend(f *testing.F) {
	f.Add("AAAA", uint8(0), false)
	f.Add("not base64", uint8(1), true)
	f.Add(base64.StdEncoding.EncodeToString(formatPCM.encode(nil, rtaTone(24000, 300, -6))), uint8(2), true)
	f.Fuzz(func(t *testing.T, s string, format uint8, vad bool) {
		in := NewInput(10*time.Second, rtaDefaults)
		fm := []audioFormat{formatPCM, formatPCMU, formatPCMA}[int(format)%3]
		in.SetFormat(fm)
		if vad {
			in.SetTurnDetection(mustTD(t, `{"type":"server_vad"}`))
		}
		var all []InputEvent
		for range 3 {
			evs, err := in.Append(s)
			_, decErr := base64.StdEncoding.DecodeString(s)
			if (decErr != nil) != (err != nil && strings.Contains(err.Error(), "base64")) {
				t.Fatalf("append: %v; base64 says %v", err, decErr)
			}
			all = append(all, evs...)
		}
		evs, _ := in.Commit()
		all = append(all, evs...)
		open := false
		for _, ev := range all {
			switch ev.Kind {
			case SpeechStarted:
				if open {
					t.Fatalf("started twice: %s", rtaFormatEvents(all))
				}
				open = true
			case SpeechStopped:
				if !open {
					t.Fatalf("stopped while not started: %s", rtaFormatEvents(all))
				}
				open = false
			case Committed:
				if vad && open {
					t.Fatalf("committed mid-speech: %s", rtaFormatEvents(all))
				}
			}
		}
	})
}

// BenchmarkInputAppend is a second of 24 kHz pcm16 in 20 ms chunks, the
// way a browser sends it, through decoding, resampling and the detector.
func BenchmarkInputAppend(b *testing.B) {
	for _, f := range []audioFormat{formatPCM, formatPCMU} {
		b.Run(f.betaName(), func(b *testing.B) {
			chunks := rtaChunks(f, f.encode(nil, rtaSpeechStream(f.rate)[:f.rate]), 20)
			td, _ := ParseTurnDetection(json.RawMessage(`{"type":"server_vad"}`), rtaDefaults)
			in := NewInput(time.Minute, rtaDefaults)
			in.SetFormat(f)
			in.SetTurnDetection(td)
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range chunks {
					if _, err := in.Append(c); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
