package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"koe/testkit/fakellm"
	"koe/testkit/pgtest"
	"koe/testkit/redistest"
)

// rollingSessions and rollingTurns size the load of the rolling restart.
const (
	rollingSessions = 30
	rollingTurns    = 6
)

// rollingFigures are koe-load -reconnect's counts, read from its report.
var rollingFigures = regexp.MustCompile(`\[koe\] turns: (\d+) completed, (\d+) cut, (\d+) failed[\s\S]*\[koe\] reconnects: (\d+) \((\d+) after 1012[^;]*; (\d+) sessions could not reconnect[\s\S]*back whole after a reconnect: (\d+) of`)

// TestRollingRestartUnderReconnect: three koe instances behind nginx on
// PostgreSQL and Redis, koe-load -reconnect running turns through nginx,
// and one instance gets SIGTERM while turns run on it, as in a rolling
// restart. It drains: its running turns finish, its sessions are sent
// elsewhere with 1012, and they go on in their histories on the other
// instances. No turn is cut, every session reconnects, every history
// comes back whole. (koe-load's report, with the reconnect times, is in
// the test's log.)
func TestRollingRestartUnderReconnect(t *testing.T) {
	if testing.Short() {
		t.Skip("starts koe, nginx, redis-server and koe-load in child processes")
	}
	dsn := pgtest.Schema(t)
	rds := redistest.Start(t)
	var streams atomic.Int64
	busy := make(chan struct{})
	reply := fakellm.Words("Sure, let me think about that for a moment. Here is a plan for your week, step by step.")
	llm, err := fakellm.Start("127.0.0.1:0", func(req fakellm.Request) fakellm.Reply {
		if !req.Stream {
			return fakellm.Reply{Tokens: []string{"They talked."}}
		}
		// Once every session has had a turn, the next ones run while
		// the instance is stopped.
		if streams.Add(1) == rollingSessions+rollingSessions/2 {
			close(busy)
		}
		return fakellm.Reply{Tokens: reply, Interval: 40 * time.Millisecond}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llm.Close() })
	llm.SetRecording(false)

	koes := startSharedInstances(t, 3, dsn, rds.URL(), llm.URL(), "")
	var addrs []string
	for _, k := range koes {
		addrs = append(addrs, k.addr)
	}
	lb := startNginx(t, addrs)

	load := filepath.Join(t.TempDir(), "koe-load")
	if out, err := exec.Command("go", "build", "-o", load, "koe/cmd/koe-load").CombinedOutput(); err != nil {
		t.Fatalf("go build koe-load: %v\n%s", err, out)
	}
	// nginx serves TLS with the tests' certificate: koe-load trusts it as
	// an operator trusts a self-signed deployment's, with -cacert.
	caCert, _ := writeNginxCert(t, t.TempDir())
	cmd := exec.Command(load, "-url", wsURL(lb)+"/client-ws", "-cacert", caCert, "-n", strconv.Itoa(rollingSessions),
		"-reconnect", "-turns", strconv.Itoa(rollingTurns), "-timeout", "90s", "-dial-parallel", "8")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	select {
	case <-busy:
	case err := <-done:
		t.Fatalf("koe-load ended before the restart: %v\n%s", err, out.String())
	case <-time.After(5 * time.Minute):
		t.Fatal("the sessions never got busy")
	}
	stopped := time.Now()
	if err := koes[1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-koes[1].exited:
		t.Logf("instance 2 exited %s after SIGTERM: %v", time.Since(stopped).Round(time.Millisecond), koes[1].err)
	case <-time.After(2 * time.Minute):
		t.Fatal("instance 2 did not exit after SIGTERM")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("koe-load: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Minute):
		t.Fatalf("koe-load did not end:\n%s", out.String())
	}
	t.Logf("koe-load -reconnect, %d sessions, %d turns each, instance 2 of 3 stopped mid-run:\n%s", rollingSessions, rollingTurns, out.String())
	m := rollingFigures.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("koe-load's report has not the figures expected:\n%s", out.String())
	}
	n := make([]int, len(m))
	for i := 1; i < len(m); i++ {
		n[i], _ = strconv.Atoi(m[i])
	}
	completed, cut, failed, reconnects, byRestart, lost, whole := n[1], n[2], n[3], n[4], n[5], n[6], n[7]
	if cut != 0 || failed != 0 || lost != 0 || completed != rollingSessions*rollingTurns {
		t.Errorf("%d turns completed, %d cut, %d failed, %d sessions lost; want all %d completed", completed, cut, failed, lost, rollingSessions*rollingTurns)
	}
	if reconnects == 0 || byRestart != reconnects || whole != reconnects {
		t.Errorf("%d reconnects, %d after 1012, %d with the history whole; want some, all after 1012 and whole", reconnects, byRestart, whole)
	}
}
