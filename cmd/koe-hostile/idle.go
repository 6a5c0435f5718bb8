package main

import (
	"context"
	"fmt"

	"koe/testkit/loadrun"
)

// idleHeadroom is the connections koe accepts beyond the idle sessions:
// the harness's own health checks.
const idleHeadroom = 64

func idleScenario() scenario {
	return scenario{
		name:  "idle",
		about: "N (-idle-n) WebSockets that connect and say nothing: what one idle session costs",
		// koe's default cap is half its open-file limit, which can be
		// below -idle-n; the cap is not what this scenario measures.
		configFor: func(o *options) []setting {
			return []setting{{"server.max_connections", fmt.Sprint(o.idleN + idleHeadroom)}}
		},
		figure: "KiB per idle session",
		run:    runIdle,
	}
}

func runIdle(ctx context.Context, e *env) outcome {
	p := openIdle(ctx, e.koe.URL, e.o.idleN)
	defer p.close()
	open := p.size()
	out := outcome{value: nan()}
	if n, err := e.waitSessions(ctx, func(n int) bool { return n >= open }); err != nil {
		out.issues = append(out.issues, fmt.Sprintf("koe counted %d of %d sessions: %v", n, open, err))
	}
	with := loadrun.ReadUsage(e.koe.PID)
	out.text = fmt.Sprintf("%d open, %d failed; RSS with them %s", open, e.o.idleN-open, mib(with.RSS))
	if open > 0 {
		out.value = float64(with.RSS-e.before.RSS) / float64(open)
		out.text += fmt.Sprintf(": %.1f KiB per idle session", out.value)
	}
	if msg := p.firstError(); msg != "" {
		out.issues = append(out.issues, "first connect error: "+msg)
	}
	return out
}
