// Package redistest runs a real Redis server (Debian's redis-server) on
// loopback for tests: a free port, a temporary directory, no persistence.
package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/internal/proc/proctest"
)

// safety bounds the wait for redis-server to start. Only a hang reaches it.
const safety = 60 * time.Second

// Server is a redis-server on 127.0.0.1.
type Server struct {
	t       testing.TB
	bin     string
	dir     string
	Port    int
	cmd     *exec.Cmd
	outDone chan struct{}
	mu      sync.Mutex
	out     bytes.Buffer
}

// Start runs redis-server on a free port; the test's cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := proctest.LookPath(t, "redis-server", "redis-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{t: t, bin: bin, dir: t.TempDir(), Port: port}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's address for koe: redis://127.0.0.1:PORT.
func (s *Server) URL() string { return "redis://127.0.0.1:" + strconv.Itoa(s.Port) }

// Start runs redis-server (again, after Stop, on the same port, with no
// data: nothing is saved) and waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	s.cmd.Stderr = s.cmd.Stdout
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	ready := make(chan struct{})
	s.outDone = make(chan struct{})
	go func() {
		defer close(s.outDone)
		sc := bufio.NewScanner(stdout)
		seen := false
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if !seen && strings.Contains(sc.Text(), "Ready to accept connections") {
				seen = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-s.outDone:
		_ = s.cmd.Wait()
		s.t.Fatalf("redis-server ended before it was ready:\n%s", s.Output())
	case <-time.After(safety):
		s.t.Fatalf("redis-server not ready:\n%s", s.Output())
	}
}

// Output is what redis-server has logged.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// Stop kills redis-server and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.outDone
	_ = s.cmd.Wait()
	s.cmd = nil
}

// String describes the server for test logs.
func (s *Server) String() string { return fmt.Sprintf("redis-server on 127.0.0.1:%d", s.Port) }
