package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"koe/testkit/fakellm"
	"koe/testkit/loadrun"
)

const (
	targetKoe   = "koe"
	targetFloor = "floor"
)

// textOnlyConfig is koe's configuration when -koe-config is not given:
// speech off both ways, like the floor, which has neither, and room for
// n sessions (koe refuses connections beyond server.max_connections).
func textOnlyConfig(n int) string {
	return fmt.Sprintf("log_level: warn\nserver:\n  max_connections: %d\ncharacter:\n  tts:\n    engine: none\nasr:\n  engine: none\n",
		max(n+64, 10000))
}

// target is a server being measured: its WebSocket URL and, when known,
// its pid (for /proc) and its pprof address.
type target struct {
	name      string
	url       string
	pid       int
	pprofAddr string
	stop      func()
}

// startTarget starts koe or the floor, each with a fresh fake LLM at -tps,
// on free loopback ports, and waits until it listens.
func startTarget(ctx context.Context, o options, name string) (target, error) {
	interval := time.Duration(float64(time.Second) / o.tps)
	lo := loadrun.Options{
		Bin:        o.koeBin,
		Respond:    fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(o.reply), Interval: interval}),
		ConfigFile: o.koeConf,
		TempPrefix: "koe-load-",
		KeepLog:    o.keepLog,
	}
	if o.koeConf == "" {
		lo.Config = textOnlyConfig(o.n)
	}
	if o.speech.on() {
		lo.ConfigFor, lo.Speech = o.speech.config(o.n), o.speech.respond()
	}
	t := target{name: name}
	var profileArgs []string
	if o.profileDir != "" {
		port, err := loadrun.FreePort()
		if err != nil {
			return t, err
		}
		t.pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
		profileArgs = []string{"-pprof", t.pprofAddr}
	}
	switch name {
	case targetFloor:
		self, err := os.Executable()
		if err != nil {
			return t, fmt.Errorf("find this binary to start the floor: %w", err)
		}
		lo.Bin = self
		lo.TempPrefix = "koe-load-floor-"
		lo.Args = func(port int, _, _ string) []string {
			return append([]string{relayServeFlag, "-port", strconv.Itoa(port)}, profileArgs...)
		}
	case targetKoe:
		lo.Args = func(port int, conf, dir string) []string {
			return append(loadrun.KoeArgs(port, conf, dir), profileArgs...)
		}
	}
	k, err := loadrun.Launch(ctx, lo)
	if err != nil {
		return t, fmt.Errorf("start %s: %w", name, err)
	}
	t.stop = func() {
		k.Stop(10 * time.Second)
		k.Close()
	}
	if err := k.WaitListening(10 * time.Second); err != nil {
		t.stop()
		return t, fmt.Errorf("%s: %w", name, err)
	}
	t.url, t.pid = k.URL, k.PID
	what := "koe"
	if name == targetFloor {
		what = "the floor (bare relay)"
	}
	fmt.Printf("started %s (pid %d) on %s with a fake LLM at %.0f tokens/s\n", what, k.PID, k.URL, o.tps)
	if o.keepLog {
		fmt.Printf("%s's log: %s\n", name, k.LogPath)
	}
	return t, nil
}

// profileSeconds is the CPU profile's length: -profile-seconds, or long
// enough for the turns with room for a loaded machine.
func (o options) profileSeconds() int {
	if o.profileSec > 0 {
		return o.profileSec
	}
	stream := float64(len(fakellm.Words(o.reply))) / o.tps
	return int(math.Ceil(2*stream)) + 3
}
