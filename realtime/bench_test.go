package realtime_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// BenchmarkFirstAudio measures, in one koe, how long a typed turn takes
// to its first audio: through /v1/realtime (response.create to the first
// response.output_audio.delta, converted to 24 kHz PCM) and through koe's
// own /client-ws (text-input to the first audio frame). The difference is
// what the Realtime rendering costs.
//
//	go test ./realtime -run '^$' -bench FirstAudio -benchtime 200x
func BenchmarkFirstAudio(b *testing.B) {
	llm := koetest.StartLLM(b, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"Hello ", "there. ", "How are ", "you?"}}
	})
	cfg := koetest.WithFakeSpeech(koetest.Config(b, b.TempDir(), llm.URL()), llm)
	cfg.LogLevel = "error"
	m := koetest.StartKoe(b, cfg)

	rt, _, err := websocket.DefaultDialer.Dial("ws://"+m.Addr()+"/v1/realtime", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+m.Addr()+"/client-ws?koe=1", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()

	// readUntil reads messages until one whose type is typ (and, for
	// control frames, whose text is text).
	readUntil := func(c *websocket.Conn, typ, text string) {
		_ = c.SetReadDeadline(time.Now().Add(testkit.HangGuard))
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				b.Fatal(err)
			}
			var f struct{ Type, Text string }
			_ = json.Unmarshal(data, &f)
			if f.Type == typ && (text == "" || f.Text == text) {
				return
			}
		}
	}
	send := func(c *websocket.Conn, v any) {
		if err := c.WriteJSON(v); err != nil {
			b.Fatal(err)
		}
	}
	user := map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "hi"}}}}
	readUntil(rt, "conversation.created", "")

	var realtime, own time.Duration
	b.ResetTimer()
	for range b.N {
		send(rt, user)
		readUntil(rt, "conversation.item.done", "")
		start := time.Now()
		send(rt, map[string]any{"type": "response.create"})
		readUntil(rt, "response.output_audio.delta", "")
		realtime += time.Since(start)
		readUntil(rt, "response.done", "")

		start = time.Now()
		send(ws, map[string]any{"type": "text-input", "text": "hi"})
		readUntil(ws, "audio", "")
		own += time.Since(start)
		readUntil(ws, "backend-synth-complete", "")
		send(ws, map[string]any{"type": "frontend-playback-complete"})
		readUntil(ws, "control", "conversation-chain-end")
	}
	b.StopTimer()
	b.ReportMetric(float64(realtime.Microseconds())/float64(b.N), "realtime-µs/first-audio")
	b.ReportMetric(float64(own.Microseconds())/float64(b.N), "client-ws-µs/first-audio")
}
