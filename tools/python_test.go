package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/agent"
	"koe/testkit"
)

// requireSandbox skips where bubblewrap or python3 is missing, except in
// CI, whose test script installs both: there nothing is skipped.
func requireSandbox(t testing.TB) {
	t.Helper()
	for _, prog := range []string{sandboxProgram, "/usr/bin/python3", "prlimit"} {
		if _, err := exec.LookPath(prog); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing; scripts/test.sh installs it", prog)
			}
			t.Skipf("%s is missing (apt-get install bubblewrap python3)", prog)
		}
	}
}

func pythonBox(t testing.TB, s PythonSettings) *Box {
	t.Helper()
	b, err := New([]string{pythonName}, Options{Python: s})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runPython(t testing.TB, b *Box, code string) (string, error) {
	t.Helper()
	args := fmt.Sprintf(`{"code":%q}`, code)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return b.Call(ctx, agent.ToolCall{ID: "p", Name: pythonName, Arguments: args})
}

func TestPythonRuns(t *testing.T) {
	requireSandbox(t)
	b := pythonBox(t, PythonSettings{})
	got, err := runPython(t, b, "print(sum(range(10)))\nimport sys\nprint('to stderr', file=sys.stderr)")
	if err != nil || got != "45\nto stderr" {
		t.Errorf("got %q, %v", got, err)
	}
	got, err = runPython(t, b, "raise SystemExit(3)")
	if err != nil || !strings.Contains(got, "[exit status 3]") {
		t.Errorf("exit: %q, %v", got, err)
	}
	got, err = runPython(t, b, "raise SystemExit(137)")
	if err != nil || !strings.Contains(got, "[exit status 137]") {
		t.Errorf("exit 137 of its own: %q, %v", got, err)
	}
	got, err = runPython(t, b, "pass")
	if err != nil || got != "(the program printed nothing)" {
		t.Errorf("silent: %q, %v", got, err)
	}
	if _, err := runPython(t, b, "   "); err == nil {
		t.Error("empty code ran")
	}
}

// The sandbox has no network: a connection to a listener koe's own
// process can reach fails inside it.
func TestPythonNoNetwork(t *testing.T) {
	requireSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	code := fmt.Sprintf(`import socket
try:
    socket.create_connection(("127.0.0.1", %d), timeout=5)
    print("CONNECTED")
except OSError as e:
    print("refused:", e.errno)`, port)
	got, err := runPython(t, pythonBox(t, PythonSettings{}), code)
	if err != nil || strings.Contains(got, "CONNECTED") || !strings.HasPrefix(got, "refused:") {
		t.Errorf("network from the sandbox: %q, %v", got, err)
	}
}

// It cannot write outside its own directory, and what it writes there is
// gone after the run.
func TestPythonConfined(t *testing.T) {
	requireSandbox(t)
	outside := filepath.Join(t.TempDir(), "victim.txt")
	if err := os.WriteFile(outside, []byte("safe"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := fmt.Sprintf(`import os
results = []
for path in [%q, "/usr/koe-was-here", "/etc/koe-was-here", os.path.expanduser("~/../../etc/x")]:
    try:
        with open(path, "w") as f:
            f.write("pwned")
        results.append("WROTE " + path)
    except OSError as e:
        results.append("denied")
with open("mine.txt", "w") as f:
    f.write("ok")
print(" ".join(results), os.getcwd(), open("mine.txt").read())`, outside)
	b := pythonBox(t, PythonSettings{})
	got, err := runPython(t, b, code)
	if err != nil || strings.Contains(got, "WROTE") || !strings.HasSuffix(got, "/work ok") {
		t.Errorf("writes: %q, %v", got, err)
	}
	if data, _ := os.ReadFile(outside); string(data) != "safe" {
		t.Errorf("the file outside was changed: %q", data)
	}
	got, _ = runPython(t, b, `import os; print(os.listdir("."))`)
	if got != "[]" {
		t.Errorf("a later run sees %s", got)
	}
}

// CPU time, memory and output are bounded, and a cancelled run is killed
// at once with everything it started.
func TestPythonLimits(t *testing.T) {
	requireSandbox(t)
	b := pythonBox(t, PythonSettings{CPUSeconds: 1, MemoryMB: 64, FilesMB: 8, MaxOutputBytes: 1000})
	got, err := runPython(t, b, "while True: pass")
	if err != nil || !strings.Contains(got, "tools.python.cpu_seconds") {
		t.Errorf("busy loop: %q, %v", got, err)
	}
	got, err = runPython(t, b, "x = bytearray(512 * 1024 * 1024)\nprint('ALLOCATED')")
	if err != nil || strings.Contains(got, "ALLOCATED") || !strings.Contains(got, "MemoryError") {
		t.Errorf("512 MB under a 64 MB limit: %q, %v", got, err)
	}
	got, err = runPython(t, b, "print('x' * 5000)")
	if err != nil || !strings.Contains(got, "output cut") || len(got) > 1200 {
		t.Errorf("long output: %d bytes %q…, %v", len(got), got[:min(len(got), 80)], err)
	}

	// Cancelled while the program sleeps, and cancelled while bubblewrap
	// is still building the sandbox (where its --die-with-parent alone
	// leaves a child it has not armed yet running).
	cancelRun(t, b, `^python3 -I -u -$`)
	for range 10 {
		cancelRun(t, b, `python3 -I -u -`)
	}
}

// cancelRun starts a program that sleeps for ten minutes, cancels it once
// a process whose command line matches started exists, and checks that the
// call returns and that no process of the run is left.
func cancelRun(t *testing.T, b *Box, started string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := b.Call(ctx, agent.ToolCall{Name: pythonName, Arguments: `{"code":"import time\nprint('started', flush=True)\ntime.sleep(600)"}`})
		errc <- err
	}()
	testkit.Eventually(t, "the program starts", func() bool { return running(started) })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled run: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("a cancelled run did not return: a process of it survived")
	}
	if running(`python3 -I -u -`) {
		t.Fatal("a process of the cancelled run is still there")
	}
}

// running reports whether a live process's command line matches the
// pattern: the sandboxed python3 itself or bubblewrap starting it.
func running(pattern string) bool {
	out, _ := exec.Command("pgrep", "-f", pattern).Output()
	return strings.TrimSpace(string(out)) != ""
}

// Without bubblewrap the tool refuses to start unless the operator says
// otherwise.
func TestPythonNeedsSandbox(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New([]string{pythonName}, Options{})
	if err == nil || !strings.Contains(err.Error(), "tools.python.unsandboxed") {
		t.Errorf("New without bwrap: %v", err)
	}
	if _, err := New([]string{pythonName}, Options{Python: PythonSettings{Unsandboxed: true}}); err != nil {
		t.Errorf("unsandboxed: %v", err)
	}
	if _, err := New([]string{calculatorName}, Options{}); err != nil {
		t.Errorf("other tools without bwrap: %v", err)
	}
}

func TestPythonSettingsChecked(t *testing.T) {
	for _, s := range []PythonSettings{
		{CPUSeconds: -1}, {CPUSeconds: 601}, {MemoryMB: 8}, {Command: "python3 -c evil"},
		// The files' share leaves too little for the program.
		{MemoryMB: 96}, {MemoryMB: 128, FilesMB: 100}, {MaxFiles: 500 << 10},
		{FilesMB: -1}, {MaxFiles: -1}, {MaxProcesses: 2}, {MaxProcesses: 5000}, {MaxOpenFiles: 8},
		{UID: -1}, {GID: -1},
	} {
		if _, err := New([]string{calculatorName}, Options{Python: s}); err == nil || !strings.Contains(err.Error(), "tools.python.") {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

// BenchmarkPythonRun is what a trivial program costs from the call to its
// result: the sandbox's making and python's start.
func BenchmarkPythonRun(b *testing.B) {
	requireSandbox(b)
	box := pythonBox(b, PythonSettings{})
	for b.Loop() {
		if got, err := runPython(b, box, "pass"); err != nil || got != "(the program printed nothing)" {
			b.Fatalf("%q, %v", got, err)
		}
	}
}
