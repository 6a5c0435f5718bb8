package server_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/agent"
	"koe/config"
	"koe/conversation"
	"koe/history"
	"koe/internal/fakellm"
	"koe/llm"
	"koe/server"
	"koe/tts"
)

// instantEngine is a zero-cost speech engine: it returns one prepared
// second of audio at once, so that what a benchmark measures is koe's own
// work around synthesis (volumes, base64, JSON, queueing, the socket).
type instantEngine struct{ audio tts.Audio }

func (e instantEngine) Synthesize(context.Context, string) (tts.Audio, error) { return e.audio, nil }

func newInstantEngine(b *testing.B) instantEngine {
	const rate = 22050
	raw := make([]byte, 2*rate)
	for i := 0; i < rate; i++ {
		v := int16(8000 * math.Sin(2*math.Pi*220*float64(i)/rate))
		binary.LittleEndian.PutUint16(raw[2*i:], uint16(v))
	}
	a, err := tts.FromPCM16LE(raw, rate)
	if err != nil {
		b.Fatal(err)
	}
	return instantEngine{a}
}

// startBenchServer runs koe's server with engine as every character's TTS;
// mutate, if given, changes the configuration first.
func startBenchServer(b *testing.B, llmURL string, engine conversation.Synthesizer, mutate ...func(*config.Config)) string {
	cfg := config.Default()
	cfg.Character.LLM.BaseURL, cfg.Character.LLM.Model = llmURL, fakellm.ModelID
	for _, m := range mutate {
		m(&cfg)
	}
	store, err := history.Open(filepath.Join(benchDir(b), "koe.db"), history.Options{})
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	hub := conversation.NewHub(conversation.Deps{
		Config:     cfg.Conversation,
		Store:      store,
		Characters: config.NewCharacters(cfg, nil),
		NewLLM:     func(c agent.Config) agent.LLM { return llm.New(c, nil) },
		NewTTS:     func(tts.Config) (conversation.Synthesizer, error) { return engine, nil },
		Logger:     logger,
	})
	srv := server.New(server.Options{Config: cfg.Server, Hub: hub, Logger: logger})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hub.Close()
		_ = store.Close()
	})
	return ln.Addr().String()
}

// BenchmarkFirstAudioOverhead measures koe's own latency: from the moment
// the LLM stream has flushed the token that completes the first piece to
// the moment the client has received that piece's audio message.
func BenchmarkFirstAudioOverhead(b *testing.B) {
	tokens := fakellm.Words("Hello there, how are you today? I hope the weather is kind to you.")
	var mu sync.Mutex
	flushed := make([]time.Time, len(tokens))
	llm, err := fakellm.Start("127.0.0.1:0", func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: tokens, Interval: 2 * time.Millisecond, BeforeChunk: func(i int) {
			mu.Lock()
			flushed[i] = time.Now()
			mu.Unlock()
		}}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = llm.Close() })
	llm.SetRecording(false)
	addr := startBenchServer(b, llm.URL(), newInstantEngine(b))

	c := dialBench(b, addr)
	overheads := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		mu.Lock()
		clear(flushed)
		mu.Unlock()
		if err := c.WriteMessage(1, []byte(`{"type":"text-input","text":"hi"}`)); err != nil {
			b.Fatal(err)
		}
		first := true
		for {
			m, at := readBench(b, c)
			if m.typ() == "audio" && first {
				first = false
				// The completing token is the one that brings the end of
				// the piece's display text (its trailing space: a cut needs
				// to see what follows the mark).
				n, k := len(displayOf(m)), 0
				for j := 0; j < len(tokens); j++ {
					k += len(tokens[j])
					if k >= n {
						mu.Lock()
						sent := flushed[j]
						mu.Unlock()
						if sent.IsZero() {
							b.Fatalf("audio for %q arrived before token %d was sent", displayOf(m), j)
						}
						overheads = append(overheads, at.Sub(sent))
						break
					}
				}
			}
			if m.typ() == "backend-synth-complete" {
				_ = c.WriteMessage(1, []byte(`{"type":"frontend-playback-complete"}`))
			}
			if isControl("conversation-chain-end")(m) {
				break
			}
		}
	}
	b.StopTimer()
	slices.Sort(overheads)
	b.Logf("worst: %v", overheads[max(0, len(overheads)-6):])
	q := func(p float64) float64 {
		return float64(overheads[min(len(overheads)-1, int(p*float64(len(overheads))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

func dialBench(b *testing.B, addr string) *websocket.Conn {
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/client-ws", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	for i := 0; i < 5; i++ {
		readBench(b, c)
	}
	return c
}

// readBench reads one frame and notes when it arrived.
func readBench(b *testing.B, c *websocket.Conn) (msg, time.Time) {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, data, err := c.ReadMessage()
	at := time.Now()
	if err != nil {
		b.Fatal(err)
	}
	var m msg
	if err := json.Unmarshal(data, &m); err != nil {
		b.Fatal(err)
	}
	return m, at
}

func benchDir(b *testing.B) string {
	if d := os.Getenv("KOE_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}
