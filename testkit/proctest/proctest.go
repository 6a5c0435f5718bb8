// Package proctest helps tests of code that runs other programs: it finds
// the programs a test needs, and watches the processes the code under test
// starts by reading /proc (Linux), to prove that a cancel killed them.
package proctest

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"koe/testkit"
)

// LookPath returns the path of a binary the test needs, from the Debian
// package debianPackage. Without it the test is skipped or, on CI, fails:
// see Missing.
func LookPath(tb testing.TB, name, debianPackage string) string {
	tb.Helper()
	if !essential[debianPackage] {
		testkit.External(tb, name)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, name+" is not installed (Debian package "+debianPackage+")", err)
	}
	return path
}

// essential are Debian's packages every system has (a shell, coreutils):
// a test that runs their programs stays in the short lane.
var essential = map[string]bool{"coreutils": true, "dash": true}

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
