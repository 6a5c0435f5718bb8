// Package redistest runs a real Redis server (Debian's redis-server) on
// loopback for tests: a free port, a temporary directory, no persistence
// (or an append-only file, as koe's deployments run it: StartAOF).
package redistest

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"koe/testkit/proctest"
)

// safety bounds the wait for redis-server to start. Only a hang reaches it.
const safety = 60 * time.Second

// Server is a redis-server on 127.0.0.1.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	Port int
	aof  bool
	d    *proctest.Daemon
}

// Start runs redis-server on a free port; the test's cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, false)
}

// StartAOF runs redis-server with an append-only file (appendonly yes, as
// deploy/ ships it): what it held is there again after Stop and Start.
func StartAOF(t testing.TB) *Server {
	t.Helper()
	return start(t, true)
}

func start(t testing.TB, aof bool) *Server {
	t.Helper()
	bin := proctest.LookPath(t, "redis-server", "redis-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{t: t, bin: bin, dir: t.TempDir(), Port: port, aof: aof}
	s.Start()
	return s
}

// URL is the server's address for koe: redis://127.0.0.1:PORT.
func (s *Server) URL() string { return "redis://127.0.0.1:" + strconv.Itoa(s.Port) }

// Start runs redis-server (again, after Stop, on the same port, with no
// data unless it keeps an append-only file) and waits until it accepts
// connections (with the file loaded).
func (s *Server) Start() {
	s.t.Helper()
	aof := "no"
	if s.aof {
		aof = "yes"
	}
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", aof, "--dir", s.dir)
	s.d = proctest.StartDaemon(s.t, "redis-server", cmd, "Ready to accept connections", safety)
}

// Output is what redis-server has logged.
func (s *Server) Output() string { return s.d.Output() }

// Stop kills redis-server and waits for it.
func (s *Server) Stop() { s.d.Stop() }

func (s *Server) String() string { return fmt.Sprintf("redis-server on 127.0.0.1:%d", s.Port) }
