package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// -reconnect: every session runs -turns turns and, when its connection is
// lost (koe's 1012 "service restart" when an instance drains, or any
// other close), reconnects and goes on in its history, as koe's page
// does: at once after 1012, after a growing delay otherwise. The report
// counts the turns completed, cut (the connection was lost after the turn
// began) and failed, the reconnects and how long each took (from the loss
// until the history was back), and whether the history came back whole.
// Run it against instances behind a load balancer and restart one of them
// meanwhile to see what a rolling restart costs.

type reconnectOptions struct {
	on    bool
	turns int
}

func reconnectFlags() *reconnectOptions {
	ro := &reconnectOptions{}
	flag.BoolVar(&ro.on, "reconnect", false, "sessions that lose their connection (1012 or any close) reconnect and go on in their history, "+
		"as koe's page does; the report counts reconnects and turns cut and completed (turns scenario)")
	flag.IntVar(&ro.turns, "turns", 1, "turns each session runs, one after another (with -reconnect)")
	return ro
}

func (ro reconnectOptions) check() error {
	if ro.turns < 1 || ro.turns > 10000 {
		return errors.New("-turns must be between 1 and 10000")
	}
	if ro.turns > 1 && !ro.on {
		return errors.New("-turns needs -reconnect")
	}
	return nil
}

// Reconnect limits: a lost session tries this many times, waiting from
// reconnectFirst, doubling up to reconnectMax (none after 1012).
const (
	reconnectTries = 30
	reconnectFirst = 100 * time.Millisecond
	reconnectMax   = 2 * time.Second
	serviceRestart = 1012
)

// reconnectFigures are what the sessions of one run did.
type reconnectFigures struct {
	mu         sync.Mutex
	completed  int
	cut        int
	failed     int
	reconnects int
	byRestart  int // reconnects after a 1012
	lost       int // sessions that could not reconnect
	continued  int // reconnects whose history-data held every completed turn
	took       []time.Duration
	errs       []error
	first      []time.Duration
	total      []time.Duration
}

// rsession is one session that reconnects.
type rsession struct {
	url     string
	dialer  websocket.Dialer
	header  http.Header // koe's token (-token), on every dial
	ws      *websocket.Conn
	history string
	done    int // turns completed
}

// open dials and puts the session back: its history, or a new one.
func (s *rsession) open(within time.Duration) (messages int, err error) {
	ws, resp, err := s.dialer.Dial(s.url, s.header)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return 0, explainDial(err, resp)
	}
	fail := func(what string, err error) (int, error) {
		_ = ws.Close()
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := readUntil(ws, within, func(m map[string]any) bool {
		return m["type"] == "control" && m["text"] == "start-mic"
	}); err != nil {
		return fail("connect sequence", err)
	}
	var req map[string]any
	want := "new-history-created"
	if s.history == "" {
		req = map[string]any{"type": "create-new-history"}
	} else {
		req = map[string]any{"type": "fetch-and-set-history", "history_uid": s.history}
		want = "history-data"
	}
	data, _ := json.Marshal(req)
	if err := ws.WriteMessage(websocket.TextMessage, data); err != nil {
		return fail(req["type"].(string), err)
	}
	m, err := readUntil(ws, within, func(m map[string]any) bool { return m["type"] == want || m["type"] == "error" })
	if err != nil {
		return fail(req["type"].(string), err)
	}
	if m["type"] == "error" {
		return fail(req["type"].(string), fmt.Errorf("koe answered %v", m["message"]))
	}
	if want == "new-history-created" {
		if s.history, _ = m["history_uid"].(string); s.history == "" {
			return fail("create-new-history", errors.New("no history_uid"))
		}
	} else {
		list, _ := m["messages"].([]any)
		messages = len(list)
	}
	s.ws = ws
	return messages, nil
}

// lostConn reports whether a turn's error is the connection's, and the
// close code koe sent (0 for none).
func lostConn(err error) (bool, int) {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return true, ce.Code
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return false, 0 // the turn took longer than -timeout: a failure, not a loss
	}
	return err != nil, 0
}

// run runs the session's turns, reconnecting when the connection is lost.
func (s *rsession) run(o options, ro reconnectOptions, f *reconnectFigures) {
	over := 0 // turns cut or failed: the session goes on with its next
	for s.done+over < ro.turns {
		r := s.turnOn(o.text, o.timeout)
		if r.err == nil {
			s.done++
			f.add(func() { f.completed++; f.first = append(f.first, r.firstAudio); f.total = append(f.total, r.total) })
			continue
		}
		lost, code := lostConn(r.err)
		if !lost {
			f.add(func() { f.failed++; f.errs = append(f.errs, r.err) })
			over++
			continue
		}
		if r.started {
			over++
			f.add(func() { f.cut++ })
		}
		// A turn that had not begun is sent again after the reconnect.
		lostAt := time.Now()
		_ = s.ws.Close()
		s.ws = nil
		whole, ok := s.reconnect(code, o.timeout)
		if !ok {
			f.add(func() {
				f.lost++
				f.errs = append(f.errs, fmt.Errorf("could not reconnect after %d tries", reconnectTries))
			})
			return
		}
		took := time.Since(lostAt)
		f.add(func() {
			f.reconnects++
			if code == serviceRestart {
				f.byRestart++
			}
			f.took = append(f.took, took)
			if whole {
				f.continued++
			}
		})
	}
}

// reconnect opens the session again, at once after 1012 and then with a
// growing delay; whole says its history came back with every turn it
// completed.
func (s *rsession) reconnect(code int, timeout time.Duration) (whole, ok bool) {
	wait := reconnectFirst
	if code == serviceRestart {
		wait = 0
	}
	for range reconnectTries {
		time.Sleep(wait) // a load tool pacing its own retries
		wait = min(max(2*wait, reconnectFirst), reconnectMax)
		n, err := s.open(timeout)
		if err != nil {
			continue
		}
		return n >= 2*s.done, true
	}
	return false, false
}

// turnOn runs one turn on the session's connection.
func (s *rsession) turnOn(text string, timeout time.Duration) result {
	return (&session{ws: s.ws}).turn(text, timeout)
}

func (f *reconnectFigures) add(do func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	do()
}

// runReconnect is the turns scenario with -reconnect: koe (-koe) or the
// koe at -url, every session running -turns turns.
func runReconnect(o options, ro reconnectOptions) error {
	if o.baseline || o.profileDir != "" || o.idle {
		return errors.New("-reconnect measures koe alone: without -baseline, -profile or -idle")
	}
	for i := 1; i <= o.runs; i++ {
		if o.runs > 1 {
			fmt.Printf("=== run %d of %d\n", i, o.runs)
		}
		if avg := loadAverage(); avg != "" {
			fmt.Printf("load average (1, 5, 15 min) before the run: %s\n", avg)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ro.turns)*o.timeout+2*time.Minute)
		t := target{name: targetKoe, url: o.url, pid: o.pid}
		if o.koeBin != "" {
			var err error
			if t, err = startTarget(ctx, o, targetKoe); err != nil {
				cancel()
				return err
			}
		}
		err := checkLoopback(t.url)
		if err == nil {
			f, wall := measureReconnect(o, ro, t.url)
			f.print(t.name, o.n, ro.turns, wall)
		}
		if t.stop != nil {
			t.stop()
		}
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// measureReconnect opens the sessions, a bounded number at a time, then
// runs every session's turns at once.
func measureReconnect(o options, ro reconnectOptions, url string) (*reconnectFigures, time.Duration) {
	f := &reconnectFigures{}
	dialer := o.dialer()
	sessions := make([]*rsession, o.n)
	sem := make(chan struct{}, o.dialRate)
	var wg sync.WaitGroup
	for i := range sessions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s := &rsession{url: url, dialer: dialer, header: o.dialHeader()}
			if _, err := s.open(30 * time.Second); err != nil {
				f.add(func() { f.errs = append(f.errs, fmt.Errorf("connect: %w", err)); f.lost++ })
				return
			}
			sessions[i] = s
		})
	}
	wg.Wait()
	start := time.Now()
	for _, s := range sessions {
		if s == nil {
			continue
		}
		wg.Go(func() {
			s.run(o, ro, f)
			if s.ws != nil {
				_ = s.ws.Close()
			}
		})
	}
	wg.Wait()
	return f, time.Since(start)
}

// print reports a run, in koe-load's "[name] what: figures" lines.
func (f *reconnectFigures) print(name string, n, turns int, wall time.Duration) {
	slices.Sort(f.took)
	slices.Sort(f.first)
	slices.Sort(f.total)
	fmt.Printf("[%s] sessions: %d, %d turns each, wall %s\n", name, n, turns, wall.Round(time.Millisecond))
	fmt.Printf("[%s] turns: %d completed, %d cut, %d failed (of %d)\n", name, f.completed, f.cut, f.failed, n*turns)
	fmt.Printf("[%s] reconnects: %d (%d after 1012 service restart, %d after other closes); %d sessions could not reconnect\n",
		name, f.reconnects, f.byRestart, f.reconnects-f.byRestart, f.lost)
	fmt.Printf("[%s] histories back whole after a reconnect: %d of %d\n", name, f.continued, f.reconnects)
	printDist(name, "reconnect time (loss to history back)", f.took)
	printDist(name, "time to first audio", f.first)
	printDist(name, "turn time (to chain-end)", f.total)
	for _, e := range firstN(f.errs, 3) {
		fmt.Printf("[%s]   error: %v\n", name, e)
	}
}
