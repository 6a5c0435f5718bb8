package bolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"koe"
)

// BenchmarkBackupBesideAppends backs up a database of 1,000 histories of
// 100 records (100,000 records, about 300 bytes of text each) to a file
// while a writer appends to another history, one record per commit, as a
// session does. Each iteration first lets the writer append alone, then
// takes a backup: the append latencies of both are reported, as
// append-idle-p50/p99-ms and append-backup-p50/p99-ms, besides the
// backup's time and throughput.
//
//	go test -run '^$' -bench BackupBesideAppends -benchtime 5x ./bolt
func BenchmarkBackupBesideAppends(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	s, err := Open(filepath.Join(dir, "koe.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	text := strings.Repeat("a sentence of about thirty bytes", 10)
	for h := range 1000 {
		records := make([]koe.Record, 100)
		for i := range records {
			role := koe.RoleHuman
			if i%2 == 1 {
				role = koe.RoleAI
			}
			records[i] = koe.Record{Role: role, Content: fmt.Sprintf("%d %d %s", h, i, text), Timestamp: "2026-01-02T03:04:05"}
		}
		if err := s.CreateWith(ctx, "conf", fmt.Sprintf("history-%04d", h), records...); err != nil {
			b.Fatal(err)
		}
	}
	uid, err := s.Create(ctx, "conf")
	if err != nil {
		b.Fatal(err)
	}

	var backingUp atomic.Bool
	var mu sync.Mutex
	var idle, during []time.Duration
	idleWanted := make(chan int, 1) // how many idle appends to wait for
	idleDone := make(chan struct{}, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		want := 0
		for {
			select {
			case <-stop:
				return
			case n := <-idleWanted:
				want = n
			default:
			}
			on := backingUp.Load()
			start := time.Now()
			if err := s.Append(ctx, "conf", uid, koe.Record{Role: koe.RoleHuman, Content: text}); err != nil {
				b.Error(err)
				return
			}
			d := time.Since(start)
			mu.Lock()
			if on {
				during = append(during, d)
			} else {
				idle = append(idle, d)
				if want > 0 {
					if want--; want == 0 {
						idleDone <- struct{}{}
					}
				}
			}
			mu.Unlock()
		}
	})
	var size int64
	var took time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		idleWanted <- 200
		<-idleDone
		out := filepath.Join(dir, "backup.db")
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		backingUp.Store(true)
		n, err := s.WriteBackup(ctx, f, nil)
		if err == nil {
			err = f.Sync()
		}
		backingUp.Store(false)
		took += time.Since(start)
		_ = f.Close()
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.SetBytes(size)
	mu.Lock()
	defer mu.Unlock()
	pct := func(ds []time.Duration, p float64) float64 {
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		return float64(ds[int(float64(len(ds)-1)*p)]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(size)/(1<<20), "MiB")
	b.ReportMetric(took.Seconds()/float64(b.N)*1000, "backup-ms")
	b.ReportMetric(pct(idle, 0.5), "append-idle-p50-ms")
	b.ReportMetric(pct(idle, 0.99), "append-idle-p99-ms")
	b.ReportMetric(pct(during, 0.5), "append-backup-p50-ms")
	b.ReportMetric(pct(during, 0.99), "append-backup-p99-ms")
	b.ReportMetric(float64(len(during))/float64(b.N), "appends/backup")
}
