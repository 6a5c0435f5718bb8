package realtime_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/config"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/proctest"
)

// BenchmarkFirstAudioAfterSpeech measures, on one koe, the same spoken
// sentence (espeak-ng) answered the same way by the fake LLM, through
// both of koe's voice transports, an iteration of each in turn:
//
//   - realtime: from input_audio_buffer.speech_stopped (the voice
//     detection closed the utterance; the client streamed 24 kHz pcm16
//     in 100 ms appends) to the first response.output_audio.delta;
//   - client-ws: from mic-audio-end (the OLV client's end of an
//     utterance, 16 kHz float chunks) to the first audio frame.
//
// Both include transcription: asr=pocketsphinx is koe's default engine,
// asr=fake the fake server's transcription endpoint, which isolates the
// transports. It reports each path's p50 and p99 in milliseconds:
//
//	go test ./realtime -run '^$' -bench FirstAudioAfterSpeech -benchtime 30x
func BenchmarkFirstAudioAfterSpeech(b *testing.B) {
	testkit.External(b, "espeak-ng and pocketsphinx")
	for _, engine := range []string{"pocketsphinx", "fake"} {
		b.Run("asr="+engine, func(b *testing.B) {
			if engine == "pocketsphinx" {
				proctest.LookPath(b, "pocketsphinx_continuous", "pocketsphinx")
			}
			llm := koetest.StartLLM(b, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Sure thing. Here it comes.")}))
			cfg := koetest.WithFakeSpeech(koetest.Config(b, b.TempDir(), llm.URL()), llm)
			if engine == "fake" {
				cfg.ASR.Engine = "openai"
				cfg.ASR.OpenAI.BaseURL = llm.URL()
			}
			benchFirstAudio(b, cfg)
		})
	}
}

func benchFirstAudio(b *testing.B, cfg config.Config) {
	addr := koetest.StartKoe(b, cfg).Addr()
	speech24 := rtaPCM16(rtaSpeech(b, rtaSentence, 24000, 300, 800))
	speech16 := rtaSpeech(b, rtaSentence, 16000, 300, 800)
	floats := make([]float64, len(speech16))
	for i, s := range speech16 {
		floats[i] = float64(s) / 32768
	}

	rt := rtaBenchDial(b, "ws://"+addr+"/v1/realtime", nil)
	rtaBenchUntil(b, rt, "type", "session.created")
	ws := rtaBenchDial(b, "ws://"+addr+"/client-ws", nil)

	var realtime, clientWS []time.Duration
	b.ResetTimer()
	for b.Loop() {
		// The Realtime API: stream the speech, time from speech_stopped.
		for i := 0; i < len(speech24); i += 4800 {
			rtaBenchSend(b, rt, map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(speech24[i:min(i+4800, len(speech24))])})
		}
		rtaBenchUntil(b, rt, "type", "input_audio_buffer.speech_stopped")
		t0 := time.Now()
		rtaBenchUntil(b, rt, "type", "response.output_audio.delta")
		realtime = append(realtime, time.Since(t0))
		if done := rtaBenchUntil(b, rt, "type", "response.done"); done["response"].(map[string]any)["status"] != "completed" {
			b.Fatalf("realtime response: %v", done)
		}

		// /client-ws: mic-audio-data chunks, time from mic-audio-end.
		for i := 0; i < len(floats); i += 4096 {
			rtaBenchSend(b, ws, map[string]any{"type": "mic-audio-data", "audio": floats[i:min(i+4096, len(floats))]})
		}
		t0 = time.Now()
		rtaBenchSend(b, ws, map[string]any{"type": "mic-audio-end", "images": []any{}})
		rtaBenchUntil(b, ws, "type", "audio")
		clientWS = append(clientWS, time.Since(t0))
		rtaBenchUntil(b, ws, "type", "backend-synth-complete")
		rtaBenchSend(b, ws, map[string]any{"type": "frontend-playback-complete"})
		rtaBenchUntil(b, ws, "text", "conversation-chain-end")
	}
	b.StopTimer()
	for _, p := range []struct {
		name string
		d    []time.Duration
	}{{"realtime", realtime}, {"client-ws", clientWS}} {
		slices.Sort(p.d)
		b.ReportMetric(rtaMillis(p.d, 0.5), p.name+"-p50-ms")
		b.ReportMetric(rtaMillis(p.d, 0.99), p.name+"-p99-ms")
	}
}

// rtaMillis is the q quantile of sorted durations, in milliseconds.
func rtaMillis(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(q*float64(len(sorted))))
	return float64(sorted[i].Microseconds()) / 1000
}

func rtaBenchDial(b *testing.B, url string, header map[string][]string) *websocket.Conn {
	b.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, header)
	if err != nil {
		b.Fatalf("dial %s: %v", url, err)
	}
	b.Cleanup(func() { _ = ws.Close() })
	return ws
}

func rtaBenchSend(b *testing.B, ws *websocket.Conn, v any) {
	b.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	if err := ws.WriteMessage(websocket.TextMessage, data); err != nil {
		b.Fatalf("send: %v", err)
	}
}

// rtaBenchUntil reads messages until one whose key is value; a hang fails
// after testkit.HangGuard.
func rtaBenchUntil(b *testing.B, ws *websocket.Conn, key, value string) map[string]any {
	b.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(testkit.HangGuard))
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			b.Fatalf("waiting for %s=%s: %v", key, value, err)
		}
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if m["type"] == "error" {
			b.Fatalf("waiting for %s=%s: %s", key, value, data)
		}
		if fmt.Sprint(m[key]) == value {
			return m
		}
	}
}
