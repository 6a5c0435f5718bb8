package historytest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"koe"
)

// Store latency, one operation at a time as a session does them: each
// benchmark reports the median and 99th percentile of its operations
// besides the mean (ns/op). A backend's benchmarks run them on its store:
//
//	go test -run '^$' -bench 'BenchmarkStore' ./bolt ./postgres
//
// (with KOE_TEST_PG_DSN set for PostgreSQL).

// BenchAppend appends one message to a history (one disk sync on either
// backend).
func BenchAppend(b *testing.B, be Backend) {
	ctx := b.Context()
	s := be.Open(b, nil)
	uid, err := s.Create(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	r := koe.Record{Role: koe.RoleAI, Content: "A reasonably sized reply sentence from the assistant.", Name: "Mao"}
	timed(b, func() error { return s.Append(ctx, "bench", uid, r) })
}

// BenchLoad1k loads a 1,000-message history, as a session does when it
// opens one.
func BenchLoad1k(b *testing.B, be Backend) {
	ctx := b.Context()
	s := be.Open(b, nil)
	records := benchConversation(1000)
	uid := koe.NewHistoryUID(time.Now())
	if err := s.CreateWith(ctx, "bench", uid, records...); err != nil {
		b.Fatal(err)
	}
	timed(b, func() error {
		msgs, err := s.Messages(ctx, "bench", uid)
		if err == nil && len(msgs) != 1001 {
			err = fmt.Errorf("%d records, want 1001", len(msgs))
		}
		return err
	})
}

// benchConversation is n messages of ordinary length, the user's and the
// character's in turn.
func benchConversation(n int) []koe.Record {
	records := make([]koe.Record, n)
	for i := range records {
		role := koe.RoleHuman
		if i%2 == 1 {
			role = koe.RoleAI
		}
		records[i] = koe.Record{Role: role, Content: fmt.Sprintf("message %d: a sentence of ordinary length, said in a conversation.", i), Name: "Mao"}
	}
	return records
}

// timed runs op b.N times and reports its latency percentiles.
func timed(b *testing.B, op func() error) {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
