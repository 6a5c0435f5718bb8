package proctest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hangGuard bounds every wait for a process event. Only a bug makes a
// wait last that long; a loaded CI machine makes it slow, so nothing here
// asserts how fast something happened.
const hangGuard = 30 * time.Second

// poll is how often the waits look at /proc again.
const poll = 5 * time.Millisecond

// WaitForChild waits until parent has exactly one live child bin, and
// returns its pid.
func WaitForChild(tb testing.TB, parent int, bin string) int {
	tb.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		if pids := Children(parent, bin); len(pids) == 1 {
			return pids[0]
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no child process %s of process %d appeared within %v", bin, parent, hangGuard)
		}
		time.Sleep(poll)
	}
}

// Alive reports whether pid runs. A zombie is dead: reaping it is its
// parent's business (init's, for an orphan).
func Alive(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.state != "Z"
}

// WaitGone waits until pid no longer runs. One that would never end on its
// own and outlives the guard is killed, so a failing test leaves nothing
// behind.
func WaitGone(tb testing.TB, pid int) {
	tb.Helper()
	deadline := time.Now().Add(hangGuard)
	for Alive(pid) {
		if time.Now().After(deadline) {
			tb.Errorf("process %d still runs after %v", pid, hangGuard)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		time.Sleep(poll)
	}
}

// WaitOpened waits until process pid has a file whose name starts with
// prefix open.
func WaitOpened(tb testing.TB, pid int, prefix string) {
	tb.Helper()
	deadline := time.Now().Add(hangGuard)
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	for {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(filepath.Base(target), prefix) {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("process %d opened no %s* file within %v", pid, prefix, hangGuard)
		}
		time.Sleep(poll)
	}
}

// CancelAndWait runs run in the background with a context derived from
// ctx, waits for ready to return (the processes under test then run),
// cancels, and checks that run returns context.Canceled. Whether the
// cancel killed everything is for the caller to check with WaitGone or
// Children: how long run took to return proves nothing on a loaded
// machine.
func CancelAndWait(tb testing.TB, ctx context.Context, run func(context.Context) error, ready func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- run(ctx) }()
	ready()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			tb.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(hangGuard):
		tb.Fatalf("did not return within %v of the cancel", hangGuard)
	}
}
