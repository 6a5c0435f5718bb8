// Command koe-load opens N WebSocket sessions against koe, runs one text
// turn in each at the same moment and reports time to first audio, turn
// time, errors and koe's memory.
//
// With -koe it starts koe itself (a built binary) against its own fake
// OpenAI-compatible LLM streaming at -tps tokens per second, so the numbers
// measure koe and nothing else. Without -koe it targets -url; pass -pid to
// report that process's memory.
//
// It is a benchmark tool: it talks only to the loopback addresses it is
// given, its loops are bounded by -n and -timeout, and it stops by itself.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"koe/internal/fakellm"
	"koe/internal/loadrun"
)

const defaultReply = "Sure, I can help with that. Let me think about it for a moment. " +
	"Here is what I would suggest, step by step, so that nothing gets lost."

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "koe-load:", err)
		os.Exit(1)
	}
}

type options struct {
	n        int
	url      string
	koeBin   string
	pid      int
	tps      float64
	reply    string
	text     string
	timeout  time.Duration
	dialRate int
	koeConf  string
	keepLog  bool
}

func run() error {
	var o options
	flag.IntVar(&o.n, "n", 100, "number of concurrent sessions")
	flag.StringVar(&o.url, "url", "ws://127.0.0.1:12393/client-ws", "koe WebSocket URL (ignored with -koe)")
	flag.StringVar(&o.koeBin, "koe", "", "path to a koe binary to start with a fake LLM (recommended)")
	flag.BoolVar(&o.keepLog, "keep-log", false, "keep the log of the koe that -koe starts")
	flag.StringVar(&o.koeConf, "koe-config", "", "configuration file for the koe that -koe starts (its LLM, port and data are set by koe-load)")
	flag.IntVar(&o.pid, "pid", 0, "pid of the koe to report memory for (without -koe)")
	flag.Float64Var(&o.tps, "tps", 30, "fake LLM speed in tokens per second (with -koe)")
	flag.StringVar(&o.reply, "reply", defaultReply, "what the fake LLM answers (with -koe)")
	flag.StringVar(&o.text, "text", "Can you help me plan my week?", "what every session types")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up on a session after this long")
	flag.IntVar(&o.dialRate, "dial-parallel", 64, "connections opened at the same time while ramping up")
	flag.Parse()
	if o.n < 1 || o.n > 20000 {
		return errors.New("-n must be between 1 and 20000")
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout+time.Minute)
	defer cancel()

	if o.koeBin != "" {
		stop, err := startKoe(ctx, &o)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := checkLoopback(o.url); err != nil {
		return err
	}

	sessions, dialErrs := dialAll(o)
	fmt.Printf("sessions: %d open, %d failed to connect\n", len(sessions), len(dialErrs))
	for _, e := range firstN(dialErrs, 3) {
		fmt.Println("  connect error:", e)
	}
	memBefore := loadrun.ReadUsage(o.pid)

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
	wall := time.Since(start)
	memAfter := loadrun.ReadUsage(o.pid)
	for _, s := range sessions {
		_ = s.ws.Close()
	}
	report(o, results, dialErrs, wall, memBefore, memAfter)
	return nil
}

// checkLoopback refuses any target that is not on this machine.
func checkLoopback(raw string) error {
	if loadrun.IsLoopback(raw) {
		return nil
	}
	return fmt.Errorf("refusing to load %s: koe-load only targets loopback addresses", raw)
}

// startKoe starts the fake LLM and a koe wired to it, on free loopback ports.
func startKoe(ctx context.Context, o *options) (func(), error) {
	interval := time.Duration(float64(time.Second) / o.tps)
	conf := ""
	if o.koeConf == "" {
		conf = "log_level: warn\n"
	}
	k, err := loadrun.Launch(ctx, loadrun.Options{
		Bin:        o.koeBin,
		Respond:    fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(o.reply), Interval: interval}),
		ConfigFile: o.koeConf,
		Config:     conf,
		TempPrefix: "koe-load-",
		KeepLog:    o.keepLog,
	})
	if err != nil {
		return nil, err
	}
	if o.keepLog {
		fmt.Println("koe's log:", k.LogPath)
	}
	o.pid = k.PID
	o.url = k.URL
	stop := func() {
		k.Stop(0)
		k.Close()
	}
	if err := k.WaitListening(10 * time.Second); err != nil {
		stop()
		return nil, err
	}
	fmt.Printf("started koe (pid %d) on %s with a fake LLM at %.0f tokens/s\n", o.pid, o.url, o.tps)
	return stop, nil
}

type session struct {
	ws *websocket.Conn
}

// dialAll opens n sessions, a bounded number at a time, and reads each
// one's connect sequence.
func dialAll(o options) ([]*session, []error) {
	var (
		mu       sync.Mutex
		sessions []*session
		errs     []error
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, o.dialRate)
	dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	for i := 0; i < o.n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ws, _, err := dialer.Dial(o.url, nil)
			if err == nil {
				err = readGreeting(ws)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				if ws != nil {
					_ = ws.Close()
				}
				return
			}
			sessions = append(sessions, &session{ws: ws})
		}()
	}
	wg.Wait()
	return sessions, errs
}

func readGreeting(ws *websocket.Conn) error {
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer ws.SetReadDeadline(time.Time{})
	for i := 0; i < 5; i++ {
		if _, _, err := ws.ReadMessage(); err != nil {
			return fmt.Errorf("connect sequence: %w", err)
		}
	}
	return nil
}

type result struct {
	firstAudio time.Duration
	total      time.Duration
	audios     int
	err        error
}

// turn sends one text input and plays the OLV client until chain-end.
func (s *session) turn(text string, timeout time.Duration) result {
	var r result
	_ = s.ws.SetReadDeadline(time.Now().Add(timeout))
	data, _ := json.Marshal(map[string]any{"type": "text-input", "text": text, "images": []any{}})
	start := time.Now()
	if err := s.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		r.err = err
		return r
	}
	for {
		_, raw, err := s.ws.ReadMessage()
		if err != nil {
			r.err = err
			return r
		}
		var m struct{ Type, Text, Message string }
		if err := json.Unmarshal(raw, &m); err != nil {
			r.err = err
			return r
		}
		switch m.Type {
		case "audio":
			if r.audios == 0 {
				r.firstAudio = time.Since(start)
			}
			r.audios++
		case "backend-synth-complete":
			if err := s.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"frontend-playback-complete"}`)); err != nil {
				r.err = err
				return r
			}
		case "error":
			r.err = errors.New(m.Message)
			return r
		case "control":
			if m.Text == "conversation-chain-end" {
				r.total = time.Since(start)
				if r.audios == 0 {
					r.err = errors.New("turn ended without audio")
				}
				return r
			}
		}
	}
}

func report(o options, results []result, dialErrs []error, wall time.Duration, before, after loadrun.Usage) {
	var first, total []time.Duration
	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		first = append(first, r.firstAudio)
		total = append(total, r.total)
	}
	fmt.Printf("turns: %d ok, %d failed, wall %s\n", len(first), len(errs), wall.Round(time.Millisecond))
	for _, e := range firstN(errs, 3) {
		fmt.Println("  turn error:", e)
	}
	printDist("time to first audio", first)
	printDist("turn time (to chain-end)", total)
	if o.pid > 0 {
		fmt.Printf("koe memory (pid %d): RSS %.1f MiB with %d idle sessions, %.1f MiB after the turns, peak %.1f MiB\n",
			o.pid, float64(before.RSS)/1024, len(results), float64(after.RSS)/1024, float64(after.HWM)/1024)
		busy := after.CPU - before.CPU
		fmt.Printf("koe CPU during the turns: %s (%.0f%% of one core over the wall time)\n",
			busy, 100*busy.Seconds()/wall.Seconds())
	}
	fmt.Printf("errors: %d of %d sessions\n", len(errs)+len(dialErrs), o.n)
}

func printDist(name string, d []time.Duration) {
	if len(d) == 0 {
		fmt.Printf("%s: no samples\n", name)
		return
	}
	slices.Sort(d)
	q := func(p float64) time.Duration {
		return d[min(len(d)-1, int(p*float64(len(d))))].Round(100 * time.Microsecond)
	}
	fmt.Printf("%s: p50 %s  p90 %s  p99 %s  max %s\n", name, q(0.50), q(0.90), q(0.99), d[len(d)-1].Round(100*time.Microsecond))
}

func firstN(errs []error, n int) []error {
	return errs[:min(n, len(errs))]
}
