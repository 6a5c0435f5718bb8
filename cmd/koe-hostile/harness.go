package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"koe/testkit/fakellm"
	"koe/testkit/loadrun"
)

// scenario is one kind of hostile peer.
type scenario struct {
	name  string
	about string // one line, for -help and the README
	// config holds settings on top of baseConfig. A koe that does not know
	// one of them (an older koe) runs without it, and the row says so.
	config []setting
	// configFor adds settings that depend on the flags.
	configFor func(o *options) []setting
	// fileLimit runs koe under -fd-limit open files.
	fileLimit bool
	// watchesKoe: the outcome says whether koe survived.
	watchesKoe bool
	// token: koe is configured with server.auth_token probeToken, which
	// the harness's own session then carries.
	token bool
	// respond is the fake LLM; nil answers every request with a short reply.
	respond func(fakellm.Request) fakellm.Reply
	// figure names the number the summary of several runs gives a range
	// for, and format prints it (default %.1f).
	figure, format string
	run            func(ctx context.Context, e *env) outcome
}

// setting is one configuration key, dotted ("server.max_connections").
type setting struct{ key, value string }

// baseConfig is every scenario's: speech off, so that the numbers are
// koe's and not espeak-ng's, and koe's default log level, so that the log
// grows as it would for a user.
var baseConfig = []setting{
	{"log_level", "info"},
	{"character.tts.engine", "none"},
}

// outcome is what a scenario saw.
type outcome struct {
	text   string
	value  float64 // the scenario's figure; NaN when it has none this time
	noKoe  bool    // koe is gone (stopped or dead): no RSS after
	peak   int64   // KiB; set by scenarios that end koe themselves
	issues []string
}

// result is one row of the table.
type result struct {
	before, peak, after int64 // KiB; 0 when not read
	outcome
	notes []string
	err   error
}

// env is what a scenario gets: the koe it runs against and the measuring.
type env struct {
	koe    *loadrun.Koe
	o      *options
	token  string // server.auth_token, if the scenario sets it
	before loadrun.Usage
	peakOK bool
	http   *http.Client
	// lastHWM is the latest VmHWM seen, for a koe that is gone.
	lastHWM atomic.Int64
}

const (
	dialParallel   = 64               // connections opened at the same time
	settleTimeout  = 30 * time.Second // for koe to drop the sessions of clients that left
	stopGrace      = 30 * time.Second // for koe to exit after SIGTERM
	startupTimeout = 30 * time.Second
)

func runScenario(s scenario, o *options) (r result) {
	// koe lives a little longer than the scenario, so that a scenario that
	// timed out can still be measured before koe is stopped.
	koeCtx, cancelKoe := context.WithTimeout(context.Background(), o.timeout+2*stopGrace+time.Minute)
	defer cancelKoe()
	k, notes, err := startKoe(koeCtx, s, o)
	r.notes = notes
	if err != nil {
		r.err = err
		return r
	}
	defer k.Close()
	if o.keepLog {
		r.notes = append(r.notes, "koe's log: "+k.LogPath)
	}
	e := &env{koe: k, o: o, http: &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}}
	if s.token {
		e.token = probeToken
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := e.warmUp(ctx); err != nil {
		r.err = fmt.Errorf("warm-up session: %w", err)
		return r
	}
	e.mark()
	stopSampling := e.samplePeak()
	defer stopSampling()

	done := make(chan outcome, 1)
	go func() { done <- s.run(ctx, e) }()
	select {
	case r.outcome = <-done:
	case <-ctx.Done():
		r.outcome = outcome{text: fmt.Sprintf("TIMED OUT after %s (koe: %s)", o.timeout, k.ExitStatus()), value: math.NaN()}
		r.outcome.peak = e.peak()
		// Stopping koe breaks every connection the scenario holds.
		r.notes = append(r.notes, "stop: "+describeExit(k.Stop(stopGrace)))
		select {
		case <-done:
		case <-time.After(time.Minute):
			r.notes = append(r.notes, "the scenario did not return a minute after koe was stopped")
		}
	}
	r.before = e.before.RSS
	if !e.peakOK {
		r.notes = append(r.notes, "peak RSS could not be reset: it is the peak since koe started")
	}
	r.notes = append(r.notes, r.outcome.issues...)
	if r.outcome.noKoe || !k.Running() {
		r.peak = r.outcome.peak
		if r.peak == 0 {
			r.peak = e.peak()
		}
		if !k.Running() && !r.outcome.noKoe && !s.watchesKoe {
			r.notes = append(r.notes, "koe is not running: "+k.ExitStatus())
		}
		return r
	}

	// After: the clients have left; wait until koe has noticed.
	settle, cancelSettle := context.WithTimeout(context.Background(), settleTimeout)
	n, err := e.waitSessions(settle, func(n int) bool { return n == 0 })
	cancelSettle()
	if err != nil {
		r.notes = append(r.notes, fmt.Sprintf("after: koe still counted %d sessions %s after the clients left (%v)", n, settleTimeout, err))
	}
	if o.linger > 0 {
		select {
		case <-time.After(o.linger):
		case <-k.Exited():
		}
	}
	u := loadrun.ReadUsage(k.PID)
	r.after, r.peak = u.RSS, u.HWM
	if r.peak == 0 {
		r.peak = e.peak()
	}
	if ex := k.Stop(stopGrace); ex.Killed || ex.Code != 0 {
		r.notes = append(r.notes, "stop: "+describeExit(ex))
	}
	return r
}

// startKoe starts koe with the scenario's configuration. Settings that this
// koe does not know are left out, one retry at a time, and noted.
func startKoe(ctx context.Context, s scenario, o *options) (*loadrun.Koe, []string, error) {
	settings := append(slices.Clone(baseConfig), s.config...)
	if s.configFor != nil {
		settings = append(settings, s.configFor(o)...)
	}
	var notes []string
	for {
		yaml, lines := renderYAML(settings)
		opts := loadrun.Options{
			Bin:        o.koeBin,
			Respond:    s.respond,
			Config:     yaml,
			TempPrefix: "koe-hostile-",
			KeepLog:    o.keepLog,
		}
		if opts.Respond == nil {
			opts.Respond = fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Sure, here you are.")})
		}
		if s.fileLimit {
			opts.FileLimit = o.fdLimit
		}
		k, err := loadrun.Launch(ctx, opts)
		if err != nil {
			return nil, notes, err
		}
		err = k.WaitListening(startupTimeout)
		if err == nil {
			return k, notes, nil
		}
		log, _ := os.ReadFile(k.LogPath)
		k.Close()
		unknown := unknownKeys(string(log), lines)
		if len(unknown) == 0 {
			return nil, notes, fmt.Errorf("%w: %s", err, lastLine(string(log)))
		}
		settings = slices.DeleteFunc(settings, func(st setting) bool { return slices.Contains(unknown, st.key) })
		for _, key := range unknown {
			notes = append(notes, key+" is unknown to this koe: left out")
		}
	}
}

// renderYAML writes dotted settings as nested YAML and says on which line
// each key ended up.
func renderYAML(settings []setting) (string, map[int]string) {
	sorted := slices.Clone(settings)
	slices.SortStableFunc(sorted, func(a, b setting) int {
		return slices.Compare(strings.Split(a.key, "."), strings.Split(b.key, "."))
	})
	var b strings.Builder
	lines := map[int]string{}
	line := 0
	var prev []string
	for _, st := range sorted {
		path := strings.Split(st.key, ".")
		parents := path[:len(path)-1]
		common := 0
		for common < len(parents) && common < len(prev) && parents[common] == prev[common] {
			common++
		}
		for i := common; i < len(parents); i++ {
			fmt.Fprintf(&b, "%s%s:\n", strings.Repeat("  ", i), parents[i])
			line++
		}
		fmt.Fprintf(&b, "%s%s: %s\n", strings.Repeat("  ", len(parents)), path[len(path)-1], st.value)
		line++
		lines[line] = st.key
		prev = parents
	}
	return b.String(), lines
}

// koe names a key it does not know by its line: "conf.yaml line 3: unknown
// key server.max_connections", or in older versions "line 3: field
// max_connections not found in type server.Config".
var unknownKeyLine = regexp.MustCompile(`line (\d+): (?:unknown key|field \S+ not found)`)

func unknownKeys(log string, lines map[int]string) []string {
	var keys []string
	for _, m := range unknownKeyLine.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		if key, ok := lines[n]; ok && !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// warmUp opens and closes one session, so that what koe builds for its
// first session (the tokenizer, say) is not charged to the scenario.
func (e *env) warmUp(ctx context.Context) error {
	url := e.koe.URL
	if e.token != "" {
		url += "?token=" + e.token
	}
	ws, err := dialSession(ctx, url)
	if err != nil {
		return err
	}
	_ = ws.Close()
	_, err = e.waitSessions(ctx, func(n int) bool { return n == 0 })
	return err
}

// mark reads RSS "before" and restarts the peak from there.
func (e *env) mark() {
	e.peakOK = loadrun.ResetPeak(e.koe.PID) == nil
	e.before = loadrun.ReadUsage(e.koe.PID)
	e.lastHWM.Store(e.before.HWM)
}

// samplePeak keeps the latest VmHWM, for a koe that dies before the end;
// call the function it returns to stop.
func (e *env) samplePeak() func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-e.koe.Exited():
				return
			case <-t.C:
				if hwm := loadrun.ReadUsage(e.koe.PID).HWM; hwm > 0 && e.koe.Running() {
					e.lastHWM.Store(hwm)
				}
			}
		}
	}()
	return func() { close(stop); <-done }
}

// peak is koe's VmHWM now, or the last one seen if koe is gone.
func (e *env) peak() int64 {
	if e.koe.Running() {
		if hwm := loadrun.ReadUsage(e.koe.PID).HWM; hwm > 0 {
			return hwm
		}
	}
	return e.lastHWM.Load()
}

// healthz asks koe for its session count.
func (e *env) healthz(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.koe.Addr()+"/healthz", nil)
	if err != nil {
		return 0, err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("healthz: %s", resp.Status)
	}
	var h struct {
		Sessions int `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, fmt.Errorf("healthz: %w", err)
	}
	return h.Sessions, nil
}

// waitSessions polls /healthz until the session count satisfies ok or ctx
// ends, and returns the last count seen.
func (e *env) waitSessions(ctx context.Context, ok func(int) bool) (int, error) {
	last := -1
	for {
		n, err := e.healthz(ctx)
		if err == nil {
			last = n
			if ok(n) {
				return n, nil
			}
		}
		if !e.koe.Running() {
			return last, fmt.Errorf("koe exited: %s", e.koe.ExitStatus())
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return last, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func describeExit(ex loadrun.Exit) string {
	s := fmt.Sprintf("%s after %.2f s", ex.Status, ex.Took.Seconds())
	if ex.Killed {
		s = fmt.Sprintf("no exit %.0f s after SIGTERM, killed", ex.Took.Seconds())
	}
	return s
}

func mib(kib int64) string {
	if kib <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(kib)/1024)
}

func nan() float64 { return math.NaN() }

// clip shortens s to at most n bytes for a table cell.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
