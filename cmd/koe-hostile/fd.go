package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

const (
	fdConns   = 1000
	fdMaxConn = 200
	// fdSettle is how long the silent connections sit before they are
	// counted: long enough for koe to answer every one it will answer at
	// once (or for a koe that gives up to finish exiting), shorter than
	// koe's server.read_timeout (10 s).
	fdSettle = 5 * time.Second
)

func fdScenario() scenario {
	return scenario{
		name: "fd",
		about: fmt.Sprintf("koe under an open-file limit of -fd-limit (512) with server.max_connections: %d; "+
			"%d TCP connections that send nothing: is koe still serving and alive?", fdMaxConn, fdConns),
		config:     []setting{{"server.max_connections", fmt.Sprint(fdMaxConn)}},
		fileLimit:  true,
		watchesKoe: true,
		figure:     "connections held",
		run:        runFD,
	}
}

func runFD(ctx context.Context, e *env) outcome {
	out := outcome{value: nan()}
	conns := openRaw(ctx, e.koe.Addr(), fdConns)
	closed := false
	defer func() {
		if !closed {
			conns.close()
		}
	}()
	select {
	case <-time.After(fdSettle):
	case <-ctx.Done():
	}
	c := conns.counts()
	out.value = float64(c.held)
	out.text = fmt.Sprintf("fd limit %d: %d held, %d got 503, %d closed unanswered", e.o.fdLimit, c.held, c.refused503, c.closed)
	if c.answered > 0 {
		out.text += fmt.Sprintf(", %d other answers", c.answered)
	}
	if c.failed > 0 {
		out.text += fmt.Sprintf(", %d failed to connect", c.failed)
	}
	out.text += "; healthz while held: " + e.probe(ctx)

	conns.close()
	closed = true
	if !e.koe.Running() {
		out.text += "; KOE EXITED: " + e.koe.ExitStatus()
		return out
	}
	start := time.Now()
	again, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := e.waitSessions(again, func(int) bool { return true }); err != nil && !e.koe.Running() {
		out.text += "; healthz after they left: none, koe exited"
	} else if err != nil {
		out.text += "; healthz after they left: " + short(err)
	} else {
		out.text += fmt.Sprintf("; healthz after they left: ok in %.1f s", time.Since(start).Seconds())
	}
	if e.koe.Running() {
		out.text += "; koe running"
	} else {
		out.text += "; KOE EXITED: " + e.koe.ExitStatus()
	}
	return out
}

// probe asks /healthz once and says how it went.
func (e *env) probe(ctx context.Context) string {
	n, err := e.healthz(ctx)
	if err != nil {
		return short(err)
	}
	return fmt.Sprintf("ok (%d sessions)", n)
}

// short names an HTTP failure without the URL that net/http puts in front.
func short(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s)-i < 80 {
		return s[i+2:]
	}
	return clip(s, 80)
}
