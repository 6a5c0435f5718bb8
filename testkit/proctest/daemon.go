package proctest

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Daemon is a server process a test runs (ngircd, redis-server), its
// output kept for failure messages.
type Daemon struct {
	tb      testing.TB
	name    string
	cmd     *exec.Cmd
	outDone chan struct{}
	mu      sync.Mutex
	out     bytes.Buffer
}

// StartDaemon runs cmd and returns once its output has a line containing
// ready; a process that ends first, or is not ready within wait, fails
// the test with what it printed. Stop (or the test's cleanup) ends it.
func StartDaemon(tb testing.TB, name string, cmd *exec.Cmd, ready string, wait time.Duration) *Daemon {
	tb.Helper()
	d := &Daemon{tb: tb, name: name, cmd: cmd, outDone: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	tb.Cleanup(d.Stop)
	isReady := make(chan struct{})
	go func() {
		defer close(d.outDone)
		sc := bufio.NewScanner(stdout)
		seen := false
		for sc.Scan() {
			d.mu.Lock()
			d.out.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			if !seen && strings.Contains(sc.Text(), ready) {
				seen = true
				close(isReady)
			}
		}
	}()
	select {
	case <-isReady:
	case <-d.outDone:
		d.Stop()
		tb.Fatalf("%s ended before it was ready:\n%s", name, d.Output())
	case <-time.After(wait):
		tb.Fatalf("%s not ready within %s:\n%s", name, wait, d.Output())
	}
	return d
}

// Output is what the process has printed.
func (d *Daemon) Output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// Stop kills the process and waits for it; stopping twice is fine.
func (d *Daemon) Stop() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.outDone
	_ = d.cmd.Wait()
	d.cmd = nil
}
