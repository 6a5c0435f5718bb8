package server_test

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"koe/config"
	"koe/testkit/fakellm"
	"koe/testkit/loadrun/relay"
)

// benchReply is what the fake LLM answers in the turn benchmarks: koe-load's
// default reply.
const benchReply = "Sure, I can help with that. Let me think about it for a moment. " +
	"Here is what I would suggest, step by step, so that nothing gets lost."

// BenchmarkFirstTurn is a new session's first text turn, text only, as
// koe-load runs them: connect, greet, one reply, chain-end. cpu-µs/op is
// the CPU of the whole process per turn (the fake LLM and the client
// included); BenchmarkFirstTurnFloor runs the same turn against the load
// tool's floor, so the difference of the two is what koe adds. Profile it
// to see where:
//
//	go test ./server -run '^$' -bench FirstTurn -benchtime 2000x -cpuprofile cpu.out
func BenchmarkFirstTurn(b *testing.B) {
	llm := startBenchLLM(b)
	addr := startBenchServer(b, llm.URL(), nil)
	runFirstTurns(b, addr)
}

// BenchmarkFirstTurnFloor is BenchmarkFirstTurn against the floor.
func BenchmarkFirstTurnFloor(b *testing.B) {
	llm := startBenchLLM(b)
	r, err := relay.Start("127.0.0.1:0", relay.Options{LLMBaseURL: llm.URL(), Model: fakellm.ModelID})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	runFirstTurns(b, r.Addr())
}

func startBenchLLM(b *testing.B) *fakellm.Server {
	llm, err := fakellm.Start("127.0.0.1:0", fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(benchReply)}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = llm.Close() })
	llm.SetRecording(false)
	return llm
}

func runFirstTurns(b *testing.B, addr string) {
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		c := dialBench(b, addr)
		if err := c.WriteMessage(1, []byte(`{"type":"text-input","text":"Can you help me plan my week?"}`)); err != nil {
			b.Fatal(err)
		}
		for {
			m, _ := readBench(b, c)
			if m.typ() == "backend-synth-complete" {
				_ = c.WriteMessage(1, []byte(`{"type":"frontend-playback-complete"}`))
			}
			if isControl("conversation-chain-end")(m) {
				break
			}
		}
		_ = c.Close()
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the user and system CPU this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFirstAudioWithTool compares first audio (text-input sent to the
// first audio frame received) of a turn whose model first calls the
// calculator and then answers, with one that answers at once; the fake LLM
// streams instantly, so the difference is the tool cycle: the call, the
// second request and its first piece.
//
//	go test ./server -run '^$' -bench FirstAudioWithTool -benchtime 300x
func BenchmarkFirstAudioWithTool(b *testing.B) {
	for _, withTool := range []bool{false, true} {
		name := "no-tool"
		if withTool {
			name = "one-tool"
		}
		b.Run(name, func(b *testing.B) {
			llm, err := fakellm.Start("127.0.0.1:0", func(r fakellm.Request) fakellm.Reply {
				if !r.Stream { // the memory's summaries
					return fakellm.Reply{Tokens: []string{"They talked about arithmetic."}}
				}
				last := r.Messages[len(r.Messages)-1]
				if withTool && last.Role != "tool" {
					return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}}
				}
				return fakellm.Reply{Tokens: fakellm.Words("It is 42. Anything else?")}
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = llm.Close() })
			llm.SetRecording(false)
			addr := startBenchServer(b, llm.URL(), nil, func(c *config.Config) {
				c.Character.Tools.Enabled = []string{"calculator"}
			})
			c := dialBench(b, addr)
			var firsts []time.Duration
			for b.Loop() {
				sent := time.Now()
				if err := c.WriteMessage(1, []byte(`{"type":"text-input","text":"What is six times seven?"}`)); err != nil {
					b.Fatal(err)
				}
				first := true
				for {
					m, at := readBench(b, c)
					if first && m.typ() == "audio" {
						first = false
						firsts = append(firsts, at.Sub(sent))
					}
					if m.typ() == "backend-synth-complete" {
						_ = c.WriteMessage(1, []byte(`{"type":"frontend-playback-complete"}`))
					}
					if isControl("conversation-chain-end")(m) {
						break
					}
				}
			}
			slices.Sort(firsts)
			q := func(p float64) float64 {
				return float64(firsts[min(len(firsts)-1, int(p*float64(len(firsts))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.5), "first-audio-p50-ms")
			b.ReportMetric(q(0.99), "first-audio-p99-ms")
		})
	}
}
