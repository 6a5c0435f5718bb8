package agent_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"koe/agent"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

// returnBox is a Toolbox whose one tool returns at once and notes when.
type returnBox struct {
	mu       sync.Mutex
	returned time.Time
}

func (b *returnBox) Specs() []agent.ToolSpec {
	return []agent.ToolSpec{{Name: "now", Description: "Returns at once."}}
}

func (b *returnBox) Call(context.Context, agent.ToolCall) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.returned = time.Now()
	return "done", nil
}

// BenchmarkToolCycle is koe's own time per tool cycle: from a tool's
// return to the next LLM request arriving at the (local) LLM server, with
// the turn's memory, context building and the request on the way. The
// fake LLM answers at once, so nothing else is measured. Each turn is a
// new conversation's first, so that the fake server's decoding of an
// ever longer request is not measured with it.
//
//	go test ./agent -run '^$' -bench ToolCycle -benchtime 500x
func BenchmarkToolCycle(b *testing.B) {
	box := &returnBox{}
	var mu sync.Mutex
	var gaps []time.Duration
	s := fakellmtest.StartWith(b, func(r fakellm.Request) fakellm.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Role != "tool" {
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c", Name: "now", Arguments: "{}"}}}
		}
		box.mu.Lock()
		gap := time.Since(box.returned)
		box.mu.Unlock()
		mu.Lock()
		gaps = append(gaps, gap)
		mu.Unlock()
		return fakellm.Reply{Tokens: []string{"Done."}}
	})
	s.SetRecording(false)
	opts := testOptions(clientFor(s), persona)
	opts.Tools = box
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a := agent.New(opts)
		a.AddUser("What is the time where I am?")
		if err := a.Reply(ctx, &tokens{}); err != nil {
			b.Fatal(err)
		}
		a.Close()
	}
	b.StopTimer()
	slices.Sort(gaps)
	q := func(p float64) float64 {
		return float64(gaps[min(len(gaps)-1, int(p*float64(len(gaps))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
