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
	"koe/app"
	"koe/bolt"
	"koe/config"
	"koe/conversation"
	"koe/coord"
	"koe/histories"
	"koe/llm"
	"koe/server"
	"koe/testkit/fakellm"
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
	return startBenchServerRelay(b, llmURL, engine, nil, mutate...)
}

// startBenchServerRelay is startBenchServer whose watchers are relayed to
// and from other instances by relay (nil: none).
func startBenchServerRelay(b *testing.B, llmURL string, engine conversation.Synthesizer, relay *coord.WatchRelay, mutate ...func(*config.Config)) string {
	cfg := config.Default()
	cfg.Character.LLM.BaseURL, cfg.Character.LLM.Model = llmURL, fakellm.ModelID
	for _, m := range mutate {
		m(&cfg)
	}
	store, err := bolt.Open(filepath.Join(benchDir(b), "koe.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	chars := config.NewCharacters(cfg, nil)
	deps := conversation.Deps{
		Config:     cfg.Conversation,
		Store:      store,
		Histories:  histories.New(histories.Options{Store: store, Characters: chars, PageLimit: cfg.Conversation.HistoryMessages}),
		Characters: chars,
		NewLLM:     func(c agent.Config) agent.LLM { return llm.New(c, nil) },
		NewTTS:     func(tts.Config) (conversation.Synthesizer, error) { return engine, nil },
		Logger:     logger,
	}
	if relay != nil {
		deps.WatchRelay = relay
	}
	hub := conversation.NewHub(deps)
	if relay != nil {
		relay.Start(hub.Watchers())
		b.Cleanup(func() { _ = relay.Close() })
	}
	srv := server.New(app.HubOptions(hub, server.Options{Config: cfg.Server, Logger: logger}))
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
	fl := startFlushLLM(b)
	addr := startBenchServer(b, fl.llm.URL(), newInstantEngine(b))
	c := dialBench(b, addr)
	overheads := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, _ := fl.turn(b, c)
		overheads = append(overheads, d)
	}
	b.StopTimer()
	reportQuantiles(b, "", overheads)
	b.ReportMetric(0, "ns/op")
}

// flushLLM is a fake LLM that notes when it flushed each token of its
// reply, so that a client can tell how long koe took to turn the token
// that completed a piece into that piece's audio.
type flushLLM struct {
	llm    *fakellm.Server
	tokens []string

	mu      sync.Mutex
	flushed []time.Time
}

func startFlushLLM(b *testing.B) *flushLLM {
	fl := &flushLLM{tokens: fakellm.Words("Hello there, how are you today? I hope the weather is kind to you.")}
	fl.flushed = make([]time.Time, len(fl.tokens))
	llm, err := fakellm.Start("127.0.0.1:0", func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: fl.tokens, Interval: 2 * time.Millisecond, BeforeChunk: func(i int) {
			fl.mu.Lock()
			fl.flushed[i] = time.Now()
			fl.mu.Unlock()
		}}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = llm.Close() })
	llm.SetRecording(false)
	fl.llm = llm
	return fl
}

// turn runs one turn on c and returns koe's latency to the first audio
// and when that audio arrived.
func (fl *flushLLM) turn(b *testing.B, c *websocket.Conn) (overhead time.Duration, arrived time.Time) {
	fl.mu.Lock()
	clear(fl.flushed)
	fl.mu.Unlock()
	if err := c.WriteMessage(1, []byte(`{"type":"text-input","text":"hi"}`)); err != nil {
		b.Fatal(err)
	}
	for {
		m, at := readBench(b, c)
		if m.typ() == "audio" && arrived.IsZero() {
			arrived = at
			// The completing token is the one that brings the end of the
			// piece's display text (its trailing space: a cut needs to see
			// what follows the mark).
			n, k := len(displayOf(m)), 0
			for j := 0; j < len(fl.tokens); j++ {
				k += len(fl.tokens[j])
				if k >= n {
					fl.mu.Lock()
					sent := fl.flushed[j]
					fl.mu.Unlock()
					if sent.IsZero() {
						b.Fatalf("audio for %q arrived before token %d was sent", displayOf(m), j)
					}
					overhead = at.Sub(sent)
					break
				}
			}
		}
		if m.typ() == "backend-synth-complete" {
			_ = c.WriteMessage(1, []byte(`{"type":"frontend-playback-complete"}`))
		}
		if isControl("conversation-chain-end")(m) {
			return overhead, arrived
		}
	}
}

// reportQuantiles reports the median and 99th percentile of ds in ms,
// with prefix before the unit's name.
func reportQuantiles(b *testing.B, prefix string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.Logf("%sworst: %v", prefix, ds[max(0, len(ds)-6):])
	q := func(p float64) float64 {
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), prefix+"p50-ms")
	b.ReportMetric(q(0.99), prefix+"p99-ms")
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
