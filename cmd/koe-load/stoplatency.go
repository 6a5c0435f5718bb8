package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"koe/client"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/loadrun"
)

// The stop-latency scenario: how long after a turn is stopped every
// watcher of its character is told (control: interrupt). A WebSocket
// client on the first instance speaks, with W watchers on ?watch_conf=
// spread over the instances; each turn's reply is endless (the fake LLM
// never ends it), so it surely runs when it is stopped, and it is stopped
// once every watcher hears it. The stops take turns, one kind after the
// other:
//
//   - signal: the speaking client sends interrupt-signal;
//   - chat: POST /api/chat/HISTORY/stop of the speaker's turn, sent to
//     another instance (the only one, when there is one);
//   - stream: a chat API turn (POST /api/chat/stream on the first
//     instance), stopped as chat is.
//
// Each latency runs from the moment koe-load sends the stop to the moment
// the watcher's goroutine reads the interrupt.
const (
	stopSignal = "signal"
	stopChat   = "chat"
	stopStream = "stream"
)

// stopKinds describes each kind, in the order of the report's columns.
var stopKinds = []struct{ name, about string }{
	{stopSignal, "client interrupt"},
	{stopChat, "chat API stop"},
	{stopStream, "chat API turn stopped"},
}

func stopKindAbout(name string) string {
	for _, k := range stopKinds {
		if k.name == name {
			return k.about
		}
	}
	return name
}

// speakerUID is the speaking client's client_uid.
const speakerUID = "koe-load-speaker"

// stopOptions are the flags of -scenario stop-latency.
type stopOptions struct {
	instances, watchers string // lists: every combination is measured
	stops               int
	kinds               string
	pg, redis           string
}

// stopLatencyFlags declares the scenario's flags.
func stopLatencyFlags() *stopOptions {
	so := &stopOptions{}
	flag.StringVar(&so.instances, "instances", "1", "stop-latency: koe instances, a comma-separated list (1,3); more than one share -pg and Redis")
	flag.StringVar(&so.watchers, "watchers", "1,50", "stop-latency: watchers of the character, spread over the instances, a comma-separated list")
	flag.IntVar(&so.stops, "stops", 100, "stop-latency: stops of each kind per measurement")
	flag.StringVar(&so.kinds, "stop-kinds", stopSignal+","+stopChat+","+stopStream,
		"stop-latency: the stops, taking turns: signal (the client's interrupt-signal), chat (POST /api/chat/HISTORY/stop of the client's turn, "+
			"sent to another instance), stream (a chat API turn, stopped the same way)")
	flag.StringVar(&so.pg, "pg", "", "stop-latency: PostgreSQL DSN (loopback) that several instances share; koe-load creates a schema there and drops it")
	flag.StringVar(&so.redis, "redis", "", "stop-latency: Redis URL (loopback) that several instances share (default: koe-load starts redis-server)")
	return so
}

// stopCell is one measurement: so many instances, so many watchers.
type stopCell struct {
	instances, watchers, stops int
	kinds                      []string
}

// stopFigures are the latencies of one kind of stop.
type stopFigures struct {
	each    []time.Duration // every watcher's interrupt, of every stop
	last    []time.Duration // every stop's last watcher's
	local   []time.Duration // each, of the watchers on the speaker's instance
	remote  []time.Duration // each, of the watchers on other instances
	request []time.Duration // chat and stream: the stop request's answer
}

// stopResult is a stopCell measured.
type stopResult struct {
	stopCell
	byKind map[string]*stopFigures
	// stray counts frames a watcher got after a turn's interrupt (see
	// follow).
	stray      int64
	loadBefore string
	loadAfter  string
}

func runStopLatency(o options, so stopOptions) error {
	insts, err := intList("-instances", so.instances, 1, 10)
	if err != nil {
		return err
	}
	watchers, err := intList("-watchers", so.watchers, 1, 5000)
	if err != nil {
		return err
	}
	kinds := strings.Split(so.kinds, ",")
	for _, k := range kinds {
		if !slices.ContainsFunc(stopKinds, func(s struct{ name, about string }) bool { return s.name == k }) {
			return fmt.Errorf("-stop-kinds: %q is none of signal, chat, stream", k)
		}
	}
	switch {
	case o.koeBin == "":
		return errors.New("-scenario stop-latency needs -koe: it starts the instances itself")
	case so.stops < 1 || so.stops > 10000:
		return errors.New("-stops must be between 1 and 10000")
	case o.tps <= 0 || o.tps > 100000:
		return errors.New("-tps must be above 0 and at most 100000")
	case slices.Max(insts) > 1 && so.pg == "":
		return errors.New("several instances share a PostgreSQL store: give -pg (a DSN on this machine; koe-load creates a schema of its own there)")
	case so.redis != "" && !loadrun.IsLoopback(so.redis):
		return fmt.Errorf("refusing Redis at %s: koe-load only uses servers on this machine", so.redis)
	}
	var all []*stopResult
	for _, n := range insts {
		for _, w := range watchers {
			c := stopCell{instances: n, watchers: w, stops: so.stops, kinds: kinds}
			r, err := measureStops(o, so, c)
			if err != nil {
				return fmt.Errorf("%d instances, %d watchers: %w", n, w, err)
			}
			r.print()
			all = append(all, r)
		}
	}
	fmt.Println()
	printStopTables(all)
	return nil
}

// measureStops starts the instances, the speaker and the watchers, and
// stops c.stops turns of each kind.
func measureStops(o options, so stopOptions, c stopCell) (*stopResult, error) {
	hang := o.timeout // bounds every wait: only a hang reaches it
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	interval := time.Duration(float64(time.Second) / o.tps)
	words := fakellm.Words(o.reply)
	endless := func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: words, Interval: interval, Endless: true}
	}
	r := &stopResult{stopCell: c, byKind: map[string]*stopFigures{}, loadBefore: loadAverage()}
	fmt.Printf("=== stop-latency: %d instance(s), %d watcher(s), %d stops of each kind (%s); load average before: %s\n",
		c.instances, c.watchers, c.stops, strings.Join(c.kinds, ", "), r.loadBefore)
	in, err := startInstances(ctx, o, shared{pgDSN: so.pg, redisURL: so.redis}, c.instances, c.watchers+16, endless)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	a := in.koes[0]
	stopAt := in.koes[min(1, len(in.koes)-1)]

	sp, err := dialSpeaker(a.URL, speakerUID, hang)
	if err != nil {
		return nil, err
	}
	defer sp.Close()

	// The watchers, each followed by a goroutine that ends when its
	// connection is closed or koe-load no longer listens (quit).
	events, quit := make(chan watchEvent, 4*c.watchers), make(chan struct{})
	var stray atomic.Int64
	var wg sync.WaitGroup
	place := make([]int, c.watchers)
	var conns []*websocket.Conn
	defer func() {
		close(quit)
		for _, ws := range conns {
			_ = ws.Close()
		}
		wg.Wait()
	}()
	for i := range c.watchers {
		place[i] = watcherInstance(i, c.instances)
		ws, err := dialWatcher(in.koes[place[i]].URL, "watch_conf="+sp.conf, o.tokens, hang)
		if err != nil {
			return nil, fmt.Errorf("watcher %d on koe %d: %w", i+1, place[i]+1, err)
		}
		conns = append(conns, ws)
		wg.Add(1)
		go func() {
			defer wg.Done()
			follow(ws, i, events, quit, &stray)
		}()
	}
	for _, k := range in.koes[1:] {
		if err := awaitFollowed(k.URL, speakerUID, hang); err != nil {
			return nil, err
		}
	}

	chatAt, err := client.New("http://" + a.Addr())
	if err != nil {
		return nil, err
	}
	stopper, err := client.New("http://" + stopAt.Addr())
	if err != nil {
		return nil, err
	}
	heard := ""
	if len(words) > 0 {
		heard = words[0]
	}
	for _, k := range c.kinds {
		r.byKind[k] = &stopFigures{}
	}
	chatHistory := ""
	for i := range c.stops * len(c.kinds) {
		kind := c.kinds[i%len(c.kinds)]
		f := r.byKind[kind]
		turn := fmt.Sprintf("Tell me a long story, number %d.", i+1)
		var chat *chatTurn
		if kind == stopStream {
			chat = startChatTurn(ctx, chatAt, protocol.ChatRequest{Message: turn, ConfUID: sp.conf, HistoryUID: chatHistory})
		} else if err := sp.say(turn); err != nil {
			return nil, fmt.Errorf("speaker: %w", err)
		}
		if _, err := collect(events, c.watchers, false, hang); err != nil {
			return nil, fmt.Errorf("turn %d (%s): %w%s", i+1, kind, err, sp.explain())
		}
		history := sp.history
		if chat != nil {
			select {
			case chatHistory = <-chat.history:
				history = chatHistory
			case err := <-chat.done:
				return nil, fmt.Errorf("turn %d: the chat stream ended before it named its history: %v", i+1, err)
			}
		}

		start := time.Now()
		if kind == stopSignal {
			err = sp.interrupt(heard)
		} else {
			var stopped bool
			stopped, err = stopper.Stop(ctx, history)
			f.request = append(f.request, time.Since(start))
			if err == nil && !stopped {
				err = errors.New("koe found no turn running to stop")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("stop %d (%s): %w", i+1, kind, err)
		}
		got, err := collect(events, c.watchers, true, hang)
		if err != nil {
			return nil, fmt.Errorf("stop %d (%s): %w%s", i+1, kind, err, sp.explain())
		}
		var last time.Duration
		for _, ev := range got {
			d := ev.at.Sub(start)
			f.each = append(f.each, d)
			if place[ev.watcher] == 0 {
				f.local = append(f.local, d)
			} else {
				f.remote = append(f.remote, d)
			}
			last = max(last, d)
		}
		f.last = append(f.last, last)
		if chat != nil {
			select {
			case err := <-chat.done:
				if err != nil {
					return nil, fmt.Errorf("stop %d: the stopped chat stream: %w", i+1, err)
				}
			case <-time.After(hang):
				return nil, fmt.Errorf("stop %d: the stopped chat stream did not end", i+1)
			}
		}
	}
	r.stray = stray.Load()
	r.loadAfter = loadAverage()
	return r, nil
}

// watcherInstance spreads the watchers over the instances, the first on
// the second instance, so that one watcher of several instances watches
// from another than the speaker's.
func watcherInstance(i, instances int) int {
	return (i + 1) % instances
}

// collect waits for one event of each watcher: each turn's first audio, or
// (interrupt) its interrupt.
func collect(events <-chan watchEvent, watchers int, interrupt bool, hang time.Duration) ([]watchEvent, error) {
	what := map[bool]string{false: "the turn's first audio", true: "control: interrupt"}[interrupt]
	got := make([]watchEvent, 0, watchers)
	seen := make(map[int]bool, watchers)
	timeout := time.NewTimer(hang)
	defer timeout.Stop()
	for len(got) < watchers {
		select {
		case ev := <-events:
			if ev.interrupt != interrupt || seen[ev.watcher] {
				return nil, fmt.Errorf("watcher %d got %s while koe-load waited for %s", ev.watcher+1, map[bool]string{false: "audio", true: "an interrupt"}[ev.interrupt], what)
			}
			seen[ev.watcher] = true
			got = append(got, ev)
		case <-timeout.C:
			var missing []string
			for i := range watchers {
				if !seen[i] {
					missing = append(missing, strconv.Itoa(i+1))
				}
			}
			return nil, fmt.Errorf("%d of %d watchers got %s within %s (not: %s)", len(got), watchers, what, hang, strings.Join(missing, ", "))
		}
	}
	return got, nil
}

// explain is what the speaker was last told went wrong, to add to an error.
func (s *speaker) explain() string {
	if e := s.lastError(); e != "" {
		return "; the speaker's last error frame: " + e
	}
	return ""
}

// print reports one measurement.
func (r *stopResult) print() {
	name := fmt.Sprintf("%d×%d", r.instances, r.watchers)
	for _, k := range r.kinds {
		f := r.byKind[k]
		for _, d := range [][]time.Duration{f.each, f.last, f.local, f.remote, f.request} {
			slices.Sort(d)
		}
		about := stopKindAbout(k)
		printDist(name, about+" → each watcher's interrupt", f.each)
		printDist(name, about+" → the last watcher's", f.last)
		if r.instances > 1 {
			if len(f.local) > 0 {
				printDist(name, "  of watchers on the speaker's instance", f.local)
			}
			printDist(name, "  of watchers on other instances", f.remote)
		}
		if len(f.request) > 0 {
			printDist(name, about+": the stop request answered", f.request)
		}
	}
	fmt.Printf("[%s] frames after an interrupt: %d\n", name, r.stray)
	fmt.Printf("[%s] load average after: %s\n", name, r.loadAfter)
}

// printStopTables prints the summary: a row per measurement, p50 and p99
// of each kind of stop, for each watcher and for the last of each stop.
func printStopTables(all []*stopResult) {
	if len(all) == 0 {
		return
	}
	kinds := all[0].kinds
	ms := func(d []time.Duration, p float64) string {
		if len(d) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f ms", float64(quantile(d, p))/float64(time.Millisecond))
	}
	for _, table := range []struct {
		title string
		pick  func(*stopFigures) []time.Duration
	}{
		{"Stop → each watcher's control: interrupt", func(f *stopFigures) []time.Duration { return f.each }},
		{"Stop → the last watcher's (every watcher told)", func(f *stopFigures) []time.Duration { return f.last }},
	} {
		fmt.Println(table.title)
		fmt.Println()
		head, rule := "| Instances | Watchers |", "|---|---|"
		for _, k := range kinds {
			head += " " + stopKindAbout(k) + " p50 | p99 |"
			rule += "---|---|"
		}
		fmt.Println(head + " load before → after |")
		fmt.Println(rule + "---|")
		for _, r := range all {
			row := fmt.Sprintf("| %d | %d |", r.instances, r.watchers)
			for _, k := range kinds {
				d := table.pick(r.byKind[k])
				row += " " + ms(d, 0.50) + " | " + ms(d, 0.99) + " |"
			}
			fmt.Printf("%s %s → %s |\n", row, firstField(r.loadBefore), firstField(r.loadAfter))
		}
		fmt.Println()
	}
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// intList parses a comma-separated list of numbers within [lo, hi].
func intList(flagName, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%s: %q is not a number between %d and %d", flagName, f, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}
