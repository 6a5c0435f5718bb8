package server_test

import (
	"syscall"
	"testing"
	"time"

	"koe/internal/fakellm"
	"koe/internal/loadrun/relay"
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
