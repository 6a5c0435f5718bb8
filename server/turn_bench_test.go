package server_test

import (
	"testing"

	"koe/internal/fakellm"
)

// BenchmarkFirstTurn is a new session's first text turn, text only, as
// koe-load runs them: connect, greet, one short reply, chain-end. It is
// the CPU a turn costs koe (with the fake LLM and the client in the same
// process); profile it to see where:
//
//	go test ./server -run '^$' -bench FirstTurn -benchtime 2000x -cpuprofile cpu.out
func BenchmarkFirstTurn(b *testing.B) {
	llm, err := fakellm.Start("127.0.0.1:0", fakellm.Script(fakellm.Reply{
		Tokens: fakellm.Words("Sure, I can help with that. Let me think about it for a moment."),
	}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = llm.Close() })
	llm.SetRecording(false)
	addr := startBenchServer(b, llm.URL(), nil)
	b.ReportAllocs()
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
}
