package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"koe/testkit/loadrun"
)

// measurement is one server's figures in one run.
type measurement struct {
	name     string
	pid      int
	n        int
	open     int
	dialErrs []error
	turnErrs []error
	first    []time.Duration // time to first audio of the turns that succeeded, sorted
	total    []time.Duration // time to chain-end, sorted
	wall     time.Duration
	// start is the server's usage before the sessions connect; idle is
	// its usage once the sessions are open, greeted and
	// the server has gone quiet; after, once the turns are over and it is
	// quiet again. cpu is what it spent between the two.
	start, idle, after loadrun.Usage
	cpu                time.Duration
	profiles           []string
	// idleOnly: -idle, no turns were run.
	idleOnly bool
}

// measure opens the sessions, runs one turn in each at the same moment and
// reads the server's usage around the turns. prof, when not nil, takes
// the server's profiles of the turns.
func measure(ctx context.Context, o options, t target, prof *profiler) (*measurement, error) {
	m := &measurement{name: t.name, pid: t.pid, n: o.n, idleOnly: o.idle}
	settle(t.pid)
	m.start = loadrun.ReadUsage(t.pid)
	sessions, dialErrs := dialAll(o, t.url)
	defer func() {
		for _, s := range sessions {
			_ = s.ws.Close()
		}
	}()
	m.open, m.dialErrs = len(sessions), dialErrs
	settle(t.pid)
	m.idle = loadrun.ReadUsage(t.pid)
	if o.idle {
		return m, nil
	}

	if prof != nil {
		if err := prof.snapshot(ctx, heapProfile, "heap-before"); err != nil {
			return nil, err
		}
		if err := prof.startCPU(ctx); err != nil {
			return nil, err
		}
	}
	cpuBefore := loadrun.ReadUsage(t.pid).CPU

	results := make([]result, len(sessions))
	var wg sync.WaitGroup
	start := time.Now()
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.turn(o.text, o.timeout)
		}()
	}
	wg.Wait()
	m.wall = time.Since(start)
	// Work that follows the last chain-end (koe stores the reply) belongs
	// to the turns.
	settle(t.pid)
	m.after = loadrun.ReadUsage(t.pid)
	m.cpu = m.after.CPU - cpuBefore

	for _, r := range results {
		if r.err != nil {
			m.turnErrs = append(m.turnErrs, r.err)
			continue
		}
		m.first = append(m.first, r.firstAudio)
		m.total = append(m.total, r.total)
	}
	slices.Sort(m.first)
	slices.Sort(m.total)

	if prof != nil {
		if err := prof.snapshot(ctx, heapProfile, "heap-after"); err != nil {
			return nil, err
		}
		files, err := prof.finish(m.wall)
		if err != nil {
			return nil, err
		}
		m.profiles = files
	}
	return m, nil
}

// Waiting for a server to go quiet: no CPU tick for quietFor, polled every
// settlePoll, for at most settleMax (a server with periodic work of its own
// is read after that).
const (
	quietFor   = 250 * time.Millisecond
	settlePoll = 50 * time.Millisecond
	settleMax  = 5 * time.Second
)

// settle waits until pid has used no CPU for quietFor, so that the work
// that follows an event (greetings, the last replies) is counted with it.
func settle(pid int) {
	if pid <= 0 {
		return
	}
	deadline := time.Now().Add(settleMax)
	last := loadrun.ReadUsage(pid).CPU
	quietSince := time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(settlePoll)
		now := loadrun.ReadUsage(pid).CPU
		if now != last {
			last, quietSince = now, time.Now()
			continue
		}
		if time.Since(quietSince) >= quietFor {
			return
		}
	}
}

// perSession is what one idle session adds to the server's RSS, in KiB.
func (m *measurement) perSession() float64 {
	return float64(m.idle.RSS-m.start.RSS) / float64(m.open)
}

func (m *measurement) errors() int { return len(m.dialErrs) + len(m.turnErrs) }

// print reports one measurement as it is known.
func (m *measurement) print() {
	fmt.Printf("[%s] sessions: %d open, %d failed to connect\n", m.name, m.open, len(m.dialErrs))
	for _, e := range firstN(m.dialErrs, 3) {
		fmt.Printf("[%s]   connect error: %v\n", m.name, e)
	}
	if m.pid > 0 && m.open > 0 {
		fmt.Printf("[%s] RSS per idle session: %.1f KiB (RSS %.1f MiB before the sessions connected)\n",
			m.name, m.perSession(), mib(m.start.RSS))
	}
	if m.idleOnly {
		fmt.Printf("[%s] memory (pid %d): RSS %.1f MiB with %d idle sessions\n", m.name, m.pid, mib(m.idle.RSS), m.open)
		fmt.Printf("[%s] errors: %d of %d sessions\n", m.name, m.errors(), m.n)
		return
	}
	fmt.Printf("[%s] turns: %d ok, %d failed, wall %s\n", m.name, len(m.first), len(m.turnErrs), m.wall.Round(time.Millisecond))
	for _, e := range firstN(m.turnErrs, 3) {
		fmt.Printf("[%s]   turn error: %v\n", m.name, e)
	}
	printDist(m.name, "time to first audio", m.first)
	printDist(m.name, "turn time (to chain-end)", m.total)
	if m.pid > 0 {
		fmt.Printf("[%s] memory (pid %d): RSS %.1f MiB with %d idle sessions, %.1f MiB after the turns, peak %.1f MiB\n",
			m.name, m.pid, mib(m.idle.RSS), m.open, mib(m.after.RSS), mib(m.after.HWM))
		fmt.Printf("[%s] CPU for the turns: %s (%.0f%% of one core over the wall time)\n",
			m.name, m.cpu, 100*m.cpu.Seconds()/m.wall.Seconds())
	}
	fmt.Printf("[%s] errors: %d of %d sessions\n", m.name, m.errors(), m.n)
	for _, f := range m.profiles {
		fmt.Printf("[%s] profile: %s\n", m.name, f)
	}
	if len(m.profiles) == 4 {
		before, after, cpu, trace := m.profiles[0], m.profiles[1], m.profiles[2], m.profiles[3]
		fmt.Printf("[%s] read them with: go tool pprof -top -cum %s\n", m.name, cpu)
		fmt.Printf("[%s]                 go tool pprof -sample_index=alloc_space -top -diff_base %s %s\n", m.name, before, after)
		fmt.Printf("[%s]                 go tool trace -pprof=sched %s > sched.pb.gz; go tool pprof -top -cum sched.pb.gz\n", m.name, trace)
	}
}

func printDist(name, what string, d []time.Duration) {
	if len(d) == 0 {
		fmt.Printf("[%s] %s: no samples\n", name, what)
		return
	}
	r := func(v time.Duration) time.Duration { return v.Round(100 * time.Microsecond) }
	fmt.Printf("[%s] %s: p50 %s  p90 %s  p99 %s  max %s\n", name, what,
		r(quantile(d, 0.50)), r(quantile(d, 0.90)), r(quantile(d, 0.99)), r(d[len(d)-1]))
}

// quantile of sorted d (nearest rank).
func quantile(d []time.Duration, p float64) time.Duration {
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

func firstN(errs []error, n int) []error {
	return errs[:min(n, len(errs))]
}
