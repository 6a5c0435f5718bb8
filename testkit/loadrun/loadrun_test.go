package loadrun

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeKoeEnv makes the test binary play koe: it takes koe's flags, prints
// its configuration file and open-file limit, and then does what the
// variable's value says.
const fakeKoeEnv = "LOADRUN_FAKE_KOE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeKoeEnv); mode != "" {
		os.Exit(fakeKoe(mode))
	}
	os.Exit(m.Run())
}

func fakeKoe(mode string) int {
	fs := flag.NewFlagSet("koe", flag.ContinueOnError)
	conf := fs.String("config", "", "")
	_ = fs.String("data", "", "")
	port := fs.Int("port", 0, "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	data, _ := os.ReadFile(*conf)
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	fmt.Printf("args: %q\nconfig: %q\nnofile: %d %d\n", os.Args[1:], data, lim.Cur, lim.Max)
	if mode == "refuse" {
		fmt.Println("conf.yaml line 1: unknown key x")
		return 2
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if mode == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer ln.Close()
	select {
	case <-term:
		return 0
	case <-time.After(time.Minute): // a hang guard: never outlive the test
		return 3
	}
}

func launchFake(t *testing.T, mode string, o Options) *Koe {
	t.Helper()
	t.Setenv(fakeKoeEnv, mode)
	o.Bin = os.Args[0]
	o.TempPrefix = "loadrun-test-"
	k, err := Launch(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

func TestLaunchWaitStop(t *testing.T) {
	k := launchFake(t, "serve", Options{Config: "log_level: warn\n"})
	if err := k.WaitListening(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(k.URL, "ws://127.0.0.1:") || !IsLoopback(k.URL) {
		t.Errorf("URL %q", k.URL)
	}
	if u := ReadUsage(k.PID); u.RSS <= 0 || u.HWM < u.RSS || u.Anon <= 0 || u.File <= 0 || u.Anon+u.File > u.RSS {
		t.Errorf("usage of the running koe: %+v", u)
	}
	exit := k.Stop(30 * time.Second)
	if exit.Code != 0 || exit.Killed || exit.Status != "exit status 0" {
		t.Errorf("stop: %+v", exit)
	}
	if k.Running() {
		t.Error("still running after Stop")
	}
	log, err := os.ReadFile(k.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `config: "log_level: warn\n"`) {
		t.Errorf("koe did not get the configuration; its log:\n%s", log)
	}
	k.Close()
	if _, err := os.Stat(k.Dir); !os.IsNotExist(err) {
		t.Errorf("Close left %s behind: %v", k.Dir, err)
	}
}

// Args replaces koe's command line; the port Launch picked still comes
// with it, so WaitListening finds what was started.
func TestArgs(t *testing.T) {
	k := launchFake(t, "serve", Options{Args: func(port int, conf, dir string) []string {
		return append(KoeArgs(port, conf, dir), "-x", "y")
	}})
	defer k.Close()
	// The fake refuses the unknown flag -x and exits before it listens.
	if err := k.WaitListening(time.Hour); err == nil {
		t.Fatal("the fake listened despite -x")
	}
	k = launchFake(t, "serve", Options{Args: func(port int, _, dir string) []string {
		return []string{"-data", dir, "-port", strconv.Itoa(port)}
	}})
	if err := k.WaitListening(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	k.Stop(30 * time.Second)
	log, _ := os.ReadFile(k.LogPath)
	if want := fmt.Sprintf("args: %q\n", []string{"-data", k.Dir, "-port", strconv.Itoa(k.Port)}); !strings.Contains(string(log), want) {
		t.Errorf("koe did not get the command line Args made; its log:\n%s\nwant %s", log, want)
	}
}

func TestFileLimit(t *testing.T) {
	k := launchFake(t, "serve", Options{FileLimit: 300})
	if err := k.WaitListening(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	k.Stop(30 * time.Second)
	log, _ := os.ReadFile(k.LogPath)
	if !strings.Contains(string(log), "nofile: 300 300\n") {
		t.Errorf("koe did not run under the file limit; its log:\n%s", log)
	}
}

func TestWaitListeningSeesAnEarlyExit(t *testing.T) {
	k := launchFake(t, "refuse", Options{})
	// Far longer than the test takes: the exit must end the wait.
	err := k.WaitListening(time.Hour)
	if err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("got %v, want an error naming exit status 2", err)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	k := launchFake(t, "stubborn", Options{})
	if err := k.WaitListening(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	exit := k.Stop(100 * time.Millisecond)
	if !exit.Killed || exit.Code != -1 || exit.Status != "signal: killed" {
		t.Errorf("stop: %+v", exit)
	}
}

func TestKeepLog(t *testing.T) {
	k := launchFake(t, "refuse", Options{KeepLog: true})
	_ = k.WaitListening(time.Hour)
	k.Close()
	defer os.RemoveAll(k.Dir)
	if _, err := os.Stat(k.LogPath); err != nil {
		t.Errorf("the log was not kept: %v", err)
	}
}

func TestResetPeak(t *testing.T) {
	pid := os.Getpid()
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	high := ReadUsage(pid).HWM
	ballast = nil
	debug.FreeOSMemory()
	if err := ResetPeak(pid); err != nil {
		t.Fatal(err)
	}
	if got := ReadUsage(pid); got.HWM >= high || got.HWM < got.RSS {
		t.Errorf("peak after reset: %+v, before: %d KiB", got, high)
	}
	_ = ballast
}

func TestIsLoopback(t *testing.T) {
	for raw, want := range map[string]bool{
		"ws://127.0.0.1:12393/client-ws": true,
		"ws://localhost:1/x":             true,
		"ws://[::1]:80/":                 true,
		"127.0.0.2:9":                    true,
		"ws://10.0.0.1:1/client-ws":      false,
		"ws://example.org/client-ws":     false,
		"ws://localhost.evil.org/":       false,
		"ws://[::]:80/":                  false,
	} {
		if got := IsLoopback(raw); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", raw, got, want)
		}
	}
}
