//go:build unix

package server_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"koe/app"
	"koe/server"
	"koe/testkit"
)

// The child koe of the file-descriptor tests runs under this open-file
// limit (soft and hard), far below what the parent can open.
const childFileLimit = 256

// TestFDLimitChild is koe under a low open-file limit, started by
// TestOutOfFileDescriptors in a process of its own; it does nothing when
// run directly.
func TestFDLimitChild(t *testing.T) {
	if os.Getenv("KOE_FDLIMIT_CHILD") == "" {
		t.Skip("started by TestOutOfFileDescriptors")
	}
	lim := syscall.Rlimit{Cur: childFileLimit, Max: childFileLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.ReadTimeout = 2 * time.Minute // silent connections stay while the test runs
	if v := os.Getenv("KOE_FDLIMIT_MAXCONN"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		setMaxConnections(&cfg.Server, n)
	}
	m := &app.Main{Config: cfg, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("KOE_ADDR=%s\n", m.Addr())
	stdinClosed := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stdinClosed) }()
	select {
	case err := <-m.Done():
		fmt.Printf("KOE_SERVE_ENDED=%v\n", err)
		os.Exit(3)
	case <-stdinClosed:
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// fdChild is a running TestFDLimitChild.
type fdChild struct {
	addr   string
	ended  chan string // Serve's error, if koe stopped serving
	logged chan string // lines of its log
	stdin  io.Closer
	cmd    *exec.Cmd
}

func startFDChild(t *testing.T, maxConns string) *fdChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFDLimitChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "KOE_FDLIMIT_CHILD=1", "KOE_FDLIMIT_MAXCONN="+maxConns)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &fdChild{ended: make(chan string, 1), logged: make(chan string, 10000), stdin: stdin, cmd: cmd}
	addr := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, "KOE_ADDR="); ok {
				addr <- a
			}
			if e, ok := strings.CutPrefix(line, "KOE_SERVE_ENDED="); ok {
				ch.ended <- e
			}
		}
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case ch.logged <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { readers.Wait(); done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && !t.Failed() {
				t.Errorf("child koe: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	select {
	case ch.addr = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatal("child koe did not start")
	}
	return ch
}

// flood opens n connections that send nothing.
func flood(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 20*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// answers waits until GET path gets an answer starting with want, failing
// if koe stopped.
func (ch *fdChild) answers(t *testing.T, path, want string) {
	t.Helper()
	testkit.Await(t, fmt.Sprintf("%s answers %q", path, want), func() (string, bool) {
		select {
		case e := <-ch.ended:
			t.Fatalf("koe stopped serving: %s", e)
		default:
		}
		c, err := net.DialTimeout("tcp", ch.addr, 5*time.Second)
		if err != nil {
			return err.Error(), false
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+ch.addr+"\r\nConnection: close\r\n\r\n")
		data, _ := io.ReadAll(c)
		_ = c.Close()
		return string(data), strings.HasPrefix(string(data), want)
	})
}

// Running out of file descriptors must not stop koe. With the default
// server.max_connections (derived from the limit), connections beyond it
// get a 503 naming the key, but for probes, which get through on the
// reserve (server.health_connections); with a cap set above the limit,
// accept fails with EMFILE and koe rides it out. Either way /healthz
// answers once the flood is gone.
func TestOutOfFileDescriptors(t *testing.T) {
	if os.Getenv("KOE_FDLIMIT_CHILD") != "" {
		t.Skip("in the child")
	}
	t.Run("default cap", func(t *testing.T) {
		ch := startFDChild(t, "")
		conns := flood(t, ch.addr, 2*childFileLimit)
		defer closeAll(conns)
		// The first half of the limit is admitted and stays open; the
		// rest are answered 503, or closed at once while the 503 writers
		// are busy.
		busy := 0
		for _, c := range conns[childFileLimit/2+8:] {
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("a connection over the cap was neither answered nor closed: %v", err)
			}
			if strings.HasPrefix(string(got), "HTTP/1.1 503") && strings.Contains(string(got), "server.max_connections") {
				busy++
			}
		}
		if busy == 0 {
			t.Fatal("no connection over the cap got a 503 naming server.max_connections")
		}
		ch.answers(t, "/api/sessions", "HTTP/1.1 503")
		ch.answers(t, "/healthz", "HTTP/1.1 200")
		closeAll(conns)
		ch.answers(t, "/api/sessions", "HTTP/1.1 200")
	})
	t.Run("cap above the limit", func(t *testing.T) {
		ch := startFDChild(t, "100000")
		conns := flood(t, ch.addr, 2*childFileLimit)
		defer closeAll(conns)
		waitLog(t, ch, "too many open files")
		closeAll(conns)
		ch.answers(t, "/healthz", "HTTP/1.1 200")
	})
}

func waitLog(t *testing.T, ch *fdChild, text string) {
	t.Helper()
	guard := time.After(30 * time.Second)
	for {
		select {
		case line := <-ch.logged:
			if strings.Contains(line, text) {
				return
			}
		case e := <-ch.ended:
			t.Fatalf("koe stopped serving: %s", e)
		case <-guard:
			t.Fatalf("koe never logged %q", text)
		}
	}
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}

func setMaxConnections(c *server.Config, n int) { c.MaxConnections = n }
