// Package redistest runs a real Redis server (Debian's redis-server) on
// loopback for tests: a free port, a temporary directory, no persistence.
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
	d    *proctest.Daemon
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
	return s
}

// URL is the server's address for koe: redis://127.0.0.1:PORT.
func (s *Server) URL() string { return "redis://127.0.0.1:" + strconv.Itoa(s.Port) }

// Start runs redis-server (again, after Stop, on the same port, with no
// data: nothing is saved) and waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir)
	s.d = proctest.StartDaemon(s.t, "redis-server", cmd, "Ready to accept connections", safety)
}

// Output is what redis-server has logged.
func (s *Server) Output() string { return s.d.Output() }

// Stop kills redis-server and waits for it.
func (s *Server) Stop() { s.d.Stop() }

func (s *Server) String() string { return fmt.Sprintf("redis-server on 127.0.0.1:%d", s.Port) }
