// Command koe-hostile plays hostile peers against a real koe process and
// reports koe's memory (VmRSS, and the peak VmHWM) and what happened, one
// table row per scenario:
//
//	go build -o koe ./cmd/koe && go run ./cmd/koe-hostile -koe ./koe [-scenario NAME]... [-runs 3]
//
// Every scenario runs against a fresh koe that it starts itself, with the
// fake LLM of testkit/fakellm, a data directory of its own and speech off
// (tts.engine: none), so the numbers are koe's own. It talks only to that
// koe on loopback, bounds every loop in count and time, and stops by itself:
// a koe that hangs is reported as hanging, then killed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "koe-hostile:", err)
		os.Exit(1)
	}
}

type options struct {
	koeBin  string
	runs    int
	timeout time.Duration
	keepLog bool
	idleN   int
	fdLimit uint64
	linger  time.Duration
}

func run() error {
	var o options
	var names multiFlag
	flag.StringVar(&o.koeBin, "koe", "", "path to the koe binary to test (required)")
	flag.Var(&names, "scenario", "scenario to run (repeatable; default all): "+strings.Join(scenarioNames(), ", "))
	flag.IntVar(&o.runs, "runs", 1, "run every scenario this many times (each against a fresh koe)")
	flag.DurationVar(&o.timeout, "timeout", 4*time.Minute, "give up on a scenario after this long")
	flag.BoolVar(&o.keepLog, "keep-log", false, "keep the data directory and log of every koe started")
	flag.IntVar(&o.idleN, "idle-n", 5000, "idle WebSockets in the idle scenario")
	flag.Uint64Var(&o.fdLimit, "fd-limit", 512, "koe's open-file limit in the fd scenario")
	flag.DurationVar(&o.linger, "linger", 0, "once koe has let the clients go, wait this long more before reading RSS after "+
		"(Go gives freed memory back to the system lazily: a forced collection runs every 2 minutes)")
	flag.Usage = usage
	flag.Parse()
	if o.koeBin == "" {
		return errors.New("-koe is required: go build -o koe ./cmd/koe && go run ./cmd/koe-hostile -koe ./koe")
	}
	if o.runs < 1 || o.runs > 20 {
		return errors.New("-runs must be between 1 and 20")
	}
	if o.idleN < 1 || o.idleN > 50000 {
		return errors.New("-idle-n must be between 1 and 50000")
	}
	if o.linger < 0 || o.linger > 10*time.Minute {
		return errors.New("-linger must be between 0 and 10m")
	}
	if o.fdLimit < 64 {
		return errors.New("-fd-limit must be at least 64")
	}
	chosen, err := pick(names)
	if err != nil {
		return err
	}
	limit, err := raiseFileLimit()
	if err != nil {
		return err
	}
	// The idle scenario's sockets are held once here and once in koe, a
	// process of its own that inherits this limit.
	if need := uint64(o.idleN + 200); limit < need {
		fmt.Printf("note: this process and koe may open %d files each (RLIMIT_NOFILE); the idle scenario needs about %d\n", limit, need)
	}

	t := newTable()
	var results [][]result
	for _, s := range chosen {
		var rs []result
		for i := 0; i < o.runs; i++ {
			r := runScenario(s, &o)
			t.row(s.name, r)
			rs = append(rs, r)
		}
		results = append(results, rs)
	}
	if o.runs > 1 {
		fmt.Println()
		summarise(chosen, results)
	}
	return nil
}

// raiseFileLimit lifts this process's open-file soft limit to its hard
// limit (the Go runtime does so too; this makes it explicit and reports it).
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, fmt.Errorf("raise the open-file limit to %d: %w", lim.Max, err)
		}
	}
	return lim.Cur, nil
}

func pick(names []string) ([]scenario, error) {
	all := scenarios()
	if len(names) == 0 {
		return all, nil
	}
	var out []scenario
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.name == n {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(scenarioNames(), ", "))
		}
	}
	return out, nil
}

func scenarioNames() []string {
	var n []string
	for _, s := range scenarios() {
		n = append(n, s.name)
	}
	return n
}

func usage() {
	out := flag.CommandLine.Output()
	fmt.Fprintf(out, "Usage: koe-hostile -koe ./koe [-scenario NAME]... [flags]\n\nScenarios, each against a fresh koe:\n")
	for _, s := range scenarios() {
		fmt.Fprintf(out, "  %-10s %s\n", s.name, s.about)
	}
	fmt.Fprintf(out, "\nFlags:\n")
	flag.PrintDefaults()
}

type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*m = append(*m, s)
		}
	}
	return nil
}
