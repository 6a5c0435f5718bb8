package server_test

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"koe/app"
	"koe/config"
	"koe/knowledge"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// BenchmarkRAGFirstAudio is what each knowledge.router mode costs a voice
// turn before its first audio: text-input sent to the first audio frame
// received, through koe as main runs it (app.Main, bbolt, the fake LLM and
// its speech endpoint over loopback HTTP, both answering at once). The
// question is one the SQLite manual answers. Run it with
//
//	go test ./server -run '^$' -bench RAGFirstAudio -benchtime 100x
//
// Modes: none, the character has no documents (the floor); auto, the
// manual searched and read with no extra LLM call; llm, the router's call
// first (answering at once), then the answer; llm-300ms, the same with a
// router that takes 300 ms, as a real model's round trip would; off, the
// search tool offered and the model answering without it; off-search, the
// model calling the search tool once, then answering.
func BenchmarkRAGFirstAudio(b *testing.B) {
	modes := []struct {
		name, router string
		documents    bool
		routerDelay  time.Duration
		search       bool
	}{
		{name: "none", router: knowledge.RouterAuto},
		{name: "auto", router: knowledge.RouterAuto, documents: true},
		{name: "llm", router: knowledge.RouterLLM, documents: true},
		{name: "llm-300ms", router: knowledge.RouterLLM, documents: true, routerDelay: 300 * time.Millisecond},
		{name: "off", router: knowledge.RouterOff, documents: true},
		{name: "off-search", router: knowledge.RouterOff, documents: true, search: true},
	}
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			llm, err := fakellm.Start("127.0.0.1:0", func(r fakellm.Request) fakellm.Reply {
				switch {
				case isRouterCall(r):
					// A non-streamed reply is delayed by Interval per token.
					return fakellm.Reply{Tokens: []string{`{"route":"rag","reason":"about the manual"}`}, Interval: mode.routerDelay}
				case !r.Stream: // the memory's summaries
					return fakellm.Reply{Tokens: []string{"They talked about foreign keys."}}
				case mode.search && !slices.ContainsFunc(r.Messages, func(m fakellm.Message) bool { return m.Role == "tool" }):
					return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "s1", Name: "search_documents", Arguments: `{"query":"ON DELETE default action"}`}}}
				}
				return fakellm.Reply{Tokens: fakellm.Words("It defaults to NO ACTION [1]. Anything else?")}
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = llm.Close() })
			llm.SetRecording(false)
			cfg := koetest.WithFakeSpeech(koetest.Config(b, benchDir(b), llm.URL()), llm)
			cfg.Character.LLM.ContextWindow = 8192
			cfg.Knowledge.Router = mode.router
			koe := ragBenchKoe(b, cfg)
			if mode.documents {
				ragAdd(b, koe.Knowledge(), ragManualFiles()...)
			}
			c := dialBench(b, koe.Addr())
			var firsts []time.Duration
			for b.Loop() {
				sent := time.Now()
				if err := c.WriteMessage(1, []byte(`{"type":"text-input","text":"`+ragForeignKeyQuestion+`"}`)); err != nil {
					b.Fatal(err)
				}
				first := true
				for {
					f, at := readBench(b, c)
					switch {
					case f.typ() == "error":
						b.Fatalf("error frame: %v", f)
					case first && f.typ() == "audio":
						first = false
						firsts = append(firsts, at.Sub(sent))
					case f.typ() == "backend-synth-complete":
						_ = c.WriteMessage(1, []byte(`{"type":"frontend-playback-complete"}`))
					}
					if isControl("conversation-chain-end")(f) {
						break
					}
				}
				if first {
					b.Fatal("the turn ended without audio")
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

// ragBenchKoe runs koe as main does, logging nothing: a benchmark's log
// would be its output.
func ragBenchKoe(b *testing.B, cfg config.Config) *app.Main {
	b.Helper()
	m := &app.Main{Config: cfg, Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	return m
}
