package asr

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"koe/internal/fakellm"
	"koe/internal/proc/proctest"
)

// hangGuard bounds the waits for events in these tests. Only a bug makes
// them last; a loaded CI machine makes them slow, so nothing here asserts
// how fast something happened.
const hangGuard = 30 * time.Second

// waitDisconnect waits for the fake server to see the client leave: proof
// that the HTTP request was aborted, not left running.
func waitDisconnect(t testing.TB, s *fakellm.Server) {
	t.Helper()
	select {
	case <-s.Disconnects():
	case <-time.After(hangGuard):
		t.Fatalf("the server saw no disconnect within %v", hangGuard)
	}
}

// signal makes a channel that remembers one event.
func signal() chan struct{} { return make(chan struct{}, 1) }

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// waitFor waits for an event on c, or fails naming what did not happen.
func waitFor(t testing.TB, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(hangGuard):
		t.Fatalf("%s did not happen within %v", what, hangGuard)
	}
}

// headersClient is an HTTP client that signals headers each time response
// headers arrive: the client is then reading the body.
func headersClient(t testing.TB, headers chan struct{}) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(r)
		if err == nil {
			notify(headers)
		}
		return resp, err
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// cancelAndWait runs run in the background with a context derived from
// ctx, waits for ready to return (the work under test is then under way),
// cancels, and checks that run returns context.Canceled.
func cancelAndWait(t testing.TB, ctx context.Context, run func(context.Context) error, ready func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- run(ctx) }()
	ready()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("did not return within %v of the cancel", hangGuard)
	}
}

// waitForChild waits until parent has exactly one live child bin, and
// returns its pid.
func waitForChild(t testing.TB, parent int, bin string) int {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		if pids := proctest.Children(parent, bin); len(pids) == 1 {
			return pids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no child process %s of process %d appeared within %v", bin, parent, hangGuard)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie is dead: reaping it is its
// parent's business).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// waitGone waits until pid no longer runs. One that would never end on its
// own and outlives the guard is killed, so a failing test leaves nothing
// behind.
func waitGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Errorf("process %d still runs %v after the cancel", pid, hangGuard)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitOpened waits until process pid has a file whose name starts with
// prefix open.
func waitOpened(t testing.TB, pid int, prefix string) {
	t.Helper()
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
			t.Fatalf("process %d opened no %s* file within %v", pid, prefix, hangGuard)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
