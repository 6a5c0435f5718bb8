package recall

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"koe"
	"koe/bolt"
)

// BenchmarkIndexTurnsAtOnce measures what many turns ending together cost
// the indexer: every one of 256 histories of a bolt store gets a turn
// (two records; appending them is not timed), all are noted at once, and
// Settle waits until every one is indexed. ns/history is the indexing of
// one history's turn, its save's disk sync included.
func BenchmarkIndexTurnsAtOnce(b *testing.B) {
	const histories = 256
	st, err := bolt.Open(filepath.Join(b.TempDir(), "koe.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := b.Context()
	uids := make([]string, histories)
	for h := range uids {
		uids[h] = fmt.Sprintf("h%04d", h)
		if err := st.CreateWith(ctx, "bench", uids[h]); err != nil {
			b.Fatal(err)
		}
	}
	svc := New(Options{Store: st, Logger: quietLogger(), IndexAtOnce: IndexAtOnce})
	defer svc.Close()
	c := newChatter(17)
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.Local)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ts := at.Add(time.Duration(i) * time.Minute).Format(koe.TimestampLayout)
		for _, uid := range uids {
			for _, r := range []koe.Record{
				{Role: koe.RoleHuman, Name: "Ann", Content: c.question(), Timestamp: ts},
				{Role: koe.RoleAI, Name: "Mika", Content: c.line(), Timestamp: ts},
			} {
				if err := st.Append(ctx, "bench", uid, r); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		for _, uid := range uids {
			svc.Noted("bench", uid)
		}
		if err := svc.Settle(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*histories), "ns/history")
}
