// Package pglitetest gives tests PostgreSQL with pgvector, for the
// knowledge index's store (postgres.KnowledgeIndex).
//
// Debian has no pgvector, so scripts/test.sh starts PGlite (PostgreSQL
// compiled to WebAssembly, with its pgvector build) behind a wire-protocol
// server, scripts/pglite/server.mjs, and exports its DSN in
// KOE_TEST_POSTGRES_DSN; any real PostgreSQL with pgvector can be given
// there instead. Without it, DSN starts server.mjs itself when node and
// the npm packages (installed by scripts/test.sh under KOE_TEST_NPM_DIR)
// are found; else the test is skipped, or fails on CI.
//
// PGlite is one PostgreSQL backend behind every connection, so the DSN
// asks pgx for the simple protocol: see server.mjs.
package pglitetest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/testkit"
	"koe/testkit/proctest"
)

// EnvDSN names the DSN of a server the tests are given.
const EnvDSN = "KOE_TEST_POSTGRES_DSN"

const pgliteSocketPackage = "@electric-sql/pglite-socket"

var testPG struct {
	once sync.Once
	dsn  string
	err  error  // why no database: skip (or fail on CI)
	what string // what was missing
	cmd  *exec.Cmd
	// stdin keeps the server alive: it stops when the pipe closes, even
	// if this process is killed.
	stdin io.WriteCloser
	wait  chan error
}

// DSN returns the DSN of the tests' database, starting PGlite the first
// time when no server is given. A test binary that calls it stops the
// server with Stop from its TestMain.
func DSN(tb testing.TB) string {
	tb.Helper()
	testkit.External(tb, "PostgreSQL with pgvector")
	testPG.once.Do(start)
	if testPG.err != nil {
		proctest.Missing(tb, testPG.what, testPG.err)
	}
	return testPG.dsn
}

func start() {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		testPG.dsn = dsn
		return
	}
	fail := func(what string, err error) { testPG.what, testPG.err = what, err }
	node, err := exec.LookPath("node")
	if err != nil {
		fail("no KOE_TEST_POSTGRES_DSN, and node is not installed (Debian package nodejs) to start PGlite", err)
		return
	}
	dir := os.Getenv("KOE_TEST_NPM_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			fail("no KOE_TEST_POSTGRES_DSN, no KOE_TEST_NPM_DIR and no cache directory", err)
			return
		}
		dir = filepath.Join(cache, "koe-test-npm")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pgliteSocketPackage, "package.json")); err != nil {
		fail("no KOE_TEST_POSTGRES_DSN, and "+pgliteSocketPackage+" is not installed (scripts/test.sh installs it with npm into KOE_TEST_NPM_DIR)", err)
		return
	}
	// The script is found from this file, wherever the test runs.
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		fail("no path to scripts/pglite/server.mjs", errors.New("no caller information"))
		return
	}
	script := filepath.Join(filepath.Dir(here), "..", "..", "scripts", "pglite", "server.mjs")
	cmd := exec.Command(node, script, "0", "--exit-with-stdin")
	cmd.Env = append(os.Environ(), "KOE_TEST_NPM_DIR="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fail("PGlite's stdout", err)
		return
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fail("PGlite's stdin", err)
		return
	}
	if err := cmd.Start(); err != nil {
		fail("PGlite did not start", err)
		return
	}
	testPG.cmd, testPG.stdin, testPG.wait = cmd, stdin, make(chan error, 1)
	addr := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if a, ok := strings.CutPrefix(lines.Text(), "listening "); ok {
				addr <- a
				break
			}
		}
		close(addr)
		// Keep draining, or a full pipe would block the server.
		_, _ = io.Copy(io.Discard, stdout)
		testPG.wait <- cmd.Wait()
	}()
	// A hang guard only: PGlite takes a few seconds to start on a loaded
	// machine.
	select {
	case a, ok := <-addr:
		if !ok {
			fail("PGlite exited before listening", <-testPG.wait)
			testPG.cmd = nil
			return
		}
		testPG.dsn = pgliteDSN(a)
	case <-time.After(2 * time.Minute):
		Stop()
		fail("PGlite did not listen", errors.New("no \"listening\" line in 2 minutes"))
	}
}

// pgliteDSN is the DSN of a PGlite server at addr (host:port); see the note
// above on the simple protocol.
func pgliteDSN(addr string) string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable&default_query_exec_mode=simple_protocol&pool_max_conns=4", addr)
}

// Stop stops the PGlite server DSN started, if it did.
func Stop() {
	if testPG.cmd == nil {
		return
	}
	_ = testPG.stdin.Close()
	select {
	case <-testPG.wait:
	case <-time.After(30 * time.Second):
		_ = testPG.cmd.Process.Kill()
		<-testPG.wait
	}
	testPG.cmd = nil
}
