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
		format:     "%.0f",
		run:        runFD,
	}
}

func runFD(ctx context.Context, e *env) outcome {
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
	counted := fmt.Sprintf("%d open, %d got 503, %d closed unanswered", c.held, c.refused503, c.closed)
	if c.answered > 0 {
		counted += fmt.Sprintf(", %d other answers", c.answered)
	}
	if c.failed > 0 {
		counted += fmt.Sprintf(", %d failed to connect", c.failed)
	}
	during := e.probe(ctx)
	conns.close()
	closed = true

	after := "none"
	if e.koe.Running() {
		start := time.Now()
		again, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err := e.waitSessions(again, func(int) bool { return true })
		cancel()
		if err == nil {
			after = fmt.Sprintf("ok in %.1f s", time.Since(start).Seconds())
		} else if e.koe.Running() {
			after = short(err)
		}
	}
	if !e.koe.Running() {
		// What a dying koe still held says nothing: it is the figure's gap.
		return outcome{value: nan(), text: fmt.Sprintf("fd limit %d: KOE EXITED (%s); %d s in: %s; healthz while they were open: %s",
			e.o.fdLimit, e.koe.ExitStatus(), int(fdSettle.Seconds()), counted, during)}
	}
	return outcome{value: float64(c.held), text: fmt.Sprintf("fd limit %d: %s; healthz while they were open: %s, after they left: %s; koe running",
		e.o.fdLimit, counted, during, after)}
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
