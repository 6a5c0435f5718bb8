package bolt

import (
	"sync"
	"testing"
	"time"

	"koe"
)

// BenchmarkCreateBurst is many sessions' first turns at once: each creates
// its history with the user's message, as a burst of clients starting to
// talk does. cpu-ms/op is the process CPU per history.
func BenchmarkCreateBurst(b *testing.B) {
	ctx := b.Context()
	s, _ := openTest(b, Options{})
	rec := koe.Record{Role: koe.RoleHuman, Content: "Can you help me plan my week?", Name: "Human"}
	const burst = 100
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		for range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.CreateWith(ctx, "bench", koe.NewHistoryUID(time.Now()), rec); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
}

// BenchmarkAppendAlone is one session appending on its own, as a single
// user's turns do: each append is its own commit and disk sync.
func BenchmarkAppendAlone(b *testing.B) {
	ctx := b.Context()
	s, _ := openTest(b, Options{})
	uid, err := s.Create(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	r := koe.Record{Role: koe.RoleAI, Content: "A reasonably sized reply sentence from the assistant.", Name: "Koe"}
	for b.Loop() {
		if err := s.Append(ctx, "bench", uid, r); err != nil {
			b.Fatal(err)
		}
	}
}
