// Command koe-load opens N WebSocket sessions against koe, runs one text
// turn in each at the same moment and reports time to first audio, turn
// time, errors and koe's memory and CPU.
//
// With -koe it starts koe itself (a built binary) against its own fake
// OpenAI-compatible LLM streaming at -tps tokens per second, so the numbers
// measure koe and nothing else. Without -koe it targets -url; pass -pid to
// report that process's memory.
//
// With -baseline it also measures the floor: a bare relay in the same stack
// (testkit/loadrun/relay), started as a child process of this binary
// against a fake LLM of its own at the same speed, with the same N. Every
// run measures both, each fresh, and the report gives koe / floor.
//
// With -serve-llm it only serves that fake LLM, for a koe deployed on its
// own (-token then gives koe-load that koe's server.auth_token).
//
// With -scenario it measures something else instead; -scenario
// stop-latency times a stop until every watcher of the character is told
// (stoplatency.go).
//
// It is a benchmark tool: it talks only to the loopback addresses it is
// given, its loops are bounded by -n, -runs and -timeout, and it stops by
// itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"crypto/tls"
	"koe/testkit/loadrun"
)

const defaultReply = "Sure, I can help with that. Let me think about it for a moment. " +
	"Here is what I would suggest, step by step, so that nothing gets lost."

func main() {
	// The hidden mode that -baseline starts as its floor; not a flag of
	// the command line users see.
	if len(os.Args) > 1 && os.Args[1] == relayServeFlag {
		if err := relayServe(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "koe-load relay:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "koe-load:", err)
		os.Exit(1)
	}
}

type options struct {
	n          int
	caCert     string      // -cacert
	tls        *tls.Config // from -cacert; nil: the system's roots
	url        string
	koeBin     string
	pid        int
	tps        float64
	reply      string
	text       string
	timeout    time.Duration
	dialRate   int
	koeConf    string
	keepLog    bool
	baseline   bool
	runs       int
	tokens     bool
	profileDir string
	profileSec int
	idle       bool
	scenario   string
	token      string         // -token: koe's server.auth_token (token.go)
	serveLLM   string         // -serve-llm: only serve the fake LLM here (servellm.go)
	speech     *speechOptions // -speech (speech.go)
}

// Scenarios, by -scenario: what koe-load measures.
const (
	scenarioTurns       = "turns"
	scenarioStopLatency = "stop-latency"
)

// scenarios describes each scenario, for -h and for a name it does not know.
var scenarios = []struct{ name, about string }{
	{scenarioTurns, "N sessions run one turn each at the same moment (the default)"},
	{scenarioStopLatency, "a stop until every watcher of the character gets control: interrupt (see -instances, -watchers)"},
}

func scenarioList() string {
	var b strings.Builder
	for _, s := range scenarios {
		fmt.Fprintf(&b, "\n  %s: %s", s.name, s.about)
	}
	return b.String()
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
	flag.BoolVar(&o.baseline, "baseline", false, "also measure the floor, a bare relay in the same stack (Fiber, contrib/websocket, go-openai) "+
		"against the same fake LLM, and report koe / floor (needs -koe)")
	flag.IntVar(&o.runs, "runs", 1, "measure this many times, each against a fresh koe (and floor), and report the spread")
	flag.BoolVar(&o.tokens, "tokens", false, "offer koe's subprotocol ("+subprotocol+"), so that every LLM delta also arrives as a token frame")
	flag.StringVar(&o.profileDir, "profile", "", "write koe's (and with -baseline the floor's) CPU profile of the turns and its allocation profiles "+
		"before and after them to this directory (needs -koe; koe-load starts koe with -pprof on a loopback port)")
	flag.IntVar(&o.profileSec, "profile-seconds", 0, "length of the CPU profile in whole seconds; it must cover the turns (0: twice the reply's streaming time plus 3 s)")
	flag.BoolVar(&o.idle, "idle", false, "only open and greet the sessions and read memory: no turns (what N idle sessions cost)")
	flag.StringVar(&o.scenario, "scenario", scenarioTurns, "what to measure:"+scenarioList())
	flag.StringVar(&o.caCert, "cacert", "", "PEM certificates to trust for a wss:// -url besides the system's (a self-signed deployment's, e.g. deploy/make-cert.sh's)")
	flag.StringVar(&o.token, "token", "", "koe's server.auth_token, sent as \"Authorization: Bearer\" on every connection (default $"+envAuthToken+")")
	flag.StringVar(&o.serveLLM, "serve-llm", "", "only serve the fake LLM on this host:port (answering -reply at -tps) until Ctrl-C, for a koe deployed on its own to be pointed at")
	so := stopLatencyFlags()
	ro := reconnectFlags()
	o.speech = speechFlags()
	flag.Parse()
	if err := o.speech.validate(o); err != nil {
		return err
	}
	if o.serveLLM != "" {
		return serveLLMUntilSignal(o)
	}
	if err := ro.check(); err != nil {
		return err
	}
	switch o.scenario {
	case scenarioTurns:
	case scenarioStopLatency:
		return runStopLatency(o, *so)
	default:
		return fmt.Errorf("-scenario %q: koe-load knows%s", o.scenario, scenarioList())
	}
	if err := o.check(); err != nil {
		return err
	}
	if ro.on {
		return runReconnect(o, *ro)
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
	}

	var all []runResult
	for i := 1; i <= o.runs; i++ {
		if o.runs > 1 {
			fmt.Printf("=== run %d of %d\n", i, o.runs)
		}
		// Others' load skews every figure; say how busy the machine was.
		if avg := loadAverage(); avg != "" {
			fmt.Printf("load average (1, 5, 15 min) before the run: %s\n", avg)
		}
		r, err := oneRun(o, i)
		if err != nil {
			return err
		}
		all = append(all, r)
	}
	if o.runs > 1 || o.baseline {
		fmt.Println()
		summarise(o, all)
	}
	return nil
}

func (o *options) check() error {
	switch {
	case o.n < 1 || o.n > 20000:
		return errors.New("-n must be between 1 and 20000")
	case o.runs < 1 || o.runs > 20:
		return errors.New("-runs must be between 1 and 20")
	case o.tps <= 0 || o.tps > 100000:
		return errors.New("-tps must be above 0 and at most 100000")
	case o.baseline && o.koeBin == "":
		return errors.New("-baseline needs -koe: koe and the floor must run against the same fake LLM")
	case o.profileDir != "" && o.koeBin == "":
		return errors.New("-profile needs -koe: koe-load starts koe with -pprof itself")
	case o.profileSec < 0 || o.profileSec > 600:
		return errors.New("-profile-seconds must be between 0 and 600")
	}
	return o.loadCACert()
}

// runResult is one run: koe, and the floor with -baseline.
type runResult struct {
	koe, floor *measurement
}

// oneRun measures koe and, with -baseline, the floor, each fresh. The
// order alternates between runs, so that neither always comes first on a
// machine whose load drifts.
func oneRun(o options, index int) (runResult, error) {
	var r runResult
	order := []string{targetKoe}
	if o.baseline {
		order = []string{targetKoe, targetFloor}
		if index%2 == 0 {
			order = []string{targetFloor, targetKoe}
		}
	}
	for _, name := range order {
		m, err := measureTarget(o, name, index)
		if err != nil {
			return r, err
		}
		if name == targetKoe {
			r.koe = m
		} else {
			r.floor = m
		}
	}
	return r, nil
}

// measureTarget starts what is to be measured (unless koe-load targets a
// running koe), measures it and stops it.
func measureTarget(o options, name string, index int) (*measurement, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout+2*time.Minute)
	defer cancel()
	t := target{name: name, url: o.url, pid: o.pid}
	if o.koeBin != "" {
		var err error
		t, err = startTarget(ctx, o, name)
		if err != nil {
			return nil, err
		}
		defer t.stop()
	}
	if err := checkLoopback(t.url); err != nil {
		return nil, err
	}
	var prof *profiler
	if o.profileDir != "" {
		prof = newProfiler(t.pprofAddr, name, o, index)
	}
	m, err := measure(ctx, o, t, prof)
	if err != nil {
		return nil, err
	}
	m.print()
	return m, nil
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes and
// its number of CPUs, or "" where /proc does not say.
func loadAverage() string {
	avg, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(avg))
	if len(f) < 3 {
		return ""
	}
	return fmt.Sprintf("%s on %d CPUs", strings.Join(f[:3], " "), runtime.NumCPU())
}

// checkLoopback refuses any target that is not on this machine.
func checkLoopback(raw string) error {
	if loadrun.IsLoopback(raw) {
		return nil
	}
	return fmt.Errorf("refusing to load %s: koe-load only targets loopback addresses", raw)
}
