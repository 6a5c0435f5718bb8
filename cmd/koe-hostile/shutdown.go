package main

import (
	"context"
	"fmt"

	"koe/testkit/loadrun"
)

const (
	shutdownRaw     = 1000
	shutdownSockets = 100
)

func shutdownScenario() scenario {
	return scenario{
		name: "shutdown",
		about: fmt.Sprintf("%d idle TCP connections and %d idle WebSockets, then SIGTERM: how long koe takes to exit",
			shutdownRaw, shutdownSockets),
		figure:     "s to exit",
		format:     "%.2f",
		watchesKoe: true,
		run:        runShutdown,
	}
}

func runShutdown(ctx context.Context, e *env) outcome {
	out := outcome{value: nan(), noKoe: true}
	raw := openRaw(ctx, e.koe.Addr(), shutdownRaw)
	defer raw.close()
	ws := openIdle(ctx, e.koe.URL, shutdownSockets)
	defer ws.close()
	if n, err := e.waitSessions(ctx, func(n int) bool { return n >= ws.size() }); err != nil {
		out.issues = append(out.issues, fmt.Sprintf("koe counted %d of %d sessions: %v", n, ws.size(), err))
	}
	c := raw.counts()
	out.peak = loadrun.ReadUsage(e.koe.PID).HWM
	ex := e.koe.Stop(stopGrace)
	out.text = fmt.Sprintf("%d TCP held, %d WebSockets; SIGTERM: %s", c.held, ws.size(), describeExit(ex))
	if !ex.Killed {
		out.value = ex.Took.Seconds()
	}
	return out
}
