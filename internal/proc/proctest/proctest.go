// Package proctest helps tests of code that runs other programs: it finds
// the programs a test needs, and watches the processes the code under test
// starts by reading /proc (Linux), to prove that a cancel killed them.
package proctest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// LookPath returns the path of a binary the test needs, from the Debian
// package debianPackage. Without it the test is skipped or, on CI, fails:
// see Missing.
func LookPath(tb testing.TB, name, debianPackage string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, name+" is not installed (Debian package "+debianPackage+")", err)
	}
	return path
}

// Missing skips the test for want of what, except on CI (CI=true), where
// something missing must fail loudly rather than silently skip the only
// tests of a real engine.
func Missing(tb testing.TB, what string, err error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s, and CI=true: %v", what, err)
	}
	tb.Skipf("%s: %v", what, err)
}

// proc is what the helpers read of one process.
type proc struct {
	pid, ppid int
	state     string // Z for a zombie
	argv0     string
}

func readProc(pid int) (proc, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	// The command name is in parentheses and may contain spaces; the
	// fields after the last ')' are: state ppid …
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return proc{}, false
	}
	p := proc{pid: pid, state: fields[0]}
	p.ppid, _ = strconv.Atoi(fields[1])
	if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil {
		p.argv0, _, _ = strings.Cut(string(cmdline), "\x00")
	}
	return p, true
}

// Children lists parent's live (not zombie) children whose argv[0] is bin.
// Tests pass os.Getpid() for the processes the code under test started,
// or one of those for what it started in turn.
func Children(parent int, bin string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok && p.ppid == parent && p.argv0 == bin && p.state != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// WaitForChild waits until parent has exactly one live child bin, and
// returns its pid.
func WaitForChild(tb testing.TB, parent int, bin string) int {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if pids := Children(parent, bin); len(pids) == 1 {
			return pids[0]
		}
		time.Sleep(2 * time.Millisecond)
	}
	tb.Fatalf("no child process %s of process %d appeared", bin, parent)
	return 0
}

// WaitGone waits until pid no longer runs. A zombie counts as gone: it is
// dead, and its reaping is up to its parent (init, for an orphan).
func WaitGone(tb testing.TB, pid int, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		p, ok := readProc(pid)
		if !ok || p.state == "Z" {
			return
		}
		if time.Now().After(deadline) {
			tb.Errorf("process %d (%s) still running, state %s", pid, p.argv0, p.state)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Wrapper writes a shell script that runs bin with its arguments without
// exec'ing it, the way distribution wrappers often look, and returns its
// path. Under it the real program is a grandchild: killing only the shell
// would orphan it.
func Wrapper(tb testing.TB, bin string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), filepath.Base(bin)+"-wrapper")
	script := "#!/bin/sh\n" + bin + " \"$@\"\necho done >&2\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Cancel calls run in the background with a context derived from ctx,
// waits for ready to return (it waits until the processes under test run),
// cancels, and checks that run then returns context.Canceled within a
// second. Longer means something the cancel did not kill held run's output
// pipes open, and Wait waited for WaitDelay.
func Cancel(tb testing.TB, ctx context.Context, run func(context.Context) error, ready func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- run(ctx) }()
	ready()
	cancel()
	began := time.Now()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			tb.Errorf("err = %v, want context.Canceled", err)
		}
		if d := time.Since(began); d > time.Second {
			tb.Errorf("returned %v after the cancel", d)
		} else {
			tb.Logf("returned %v after the cancel", d)
		}
	case <-time.After(10 * time.Second):
		tb.Fatal("did not return after the cancel")
	}
}
