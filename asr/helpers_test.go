package asr

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// asrCtx bounds a test that runs real recognisers (pocketsphinx takes
// seconds on long input, more under the race detector's load).
func asrCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// needTool returns the path of a binary the test needs. Without it the test
// is skipped, except on CI (CI=true), where a missing binary must fail
// loudly rather than silently skip the only tests of the real engine.
func needTool(tb testing.TB, name, packages string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		missing(tb, name+" is not installed (Debian package "+packages+")", err)
	}
	return path
}

func missing(tb testing.TB, what string, err error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s, and CI=true: %v", what, err)
	}
	tb.Skipf("%s: %v", what, err)
}

// needPocketsphinx returns pocketsphinx_continuous's path, after checking
// that the default model (pocketsphinx-en-us) is installed too.
func needPocketsphinx(tb testing.TB) string {
	tb.Helper()
	bin := needTool(tb, "pocketsphinx_continuous", "pocketsphinx")
	c := DefaultConfig().Pocketsphinx
	for _, f := range []string{filepath.Join(c.HMM, "mdef"), c.Dict, c.LM} {
		if _, err := os.Stat(f); err != nil {
			missing(tb, "the pocketsphinx model is not installed (Debian package pocketsphinx-en-us)", err)
		}
	}
	return bin
}

// speak renders text with espeak-ng and converts it with sox to what the
// engines take: 16 kHz 16-bit mono WAV. sox runs without dither (-D): its
// dither is random, and pocketsphinx's weak model hears differently in
// every run when the input changes in the last bit. Extra sox effects (pad,
// trim…) go last.
func speak(tb testing.TB, text string, effects ...string) []byte {
	tb.Helper()
	espeak := needTool(tb, "espeak-ng", "espeak-ng")
	sox := needTool(tb, "sox", "sox")
	dir := tb.TempDir()
	raw, out := filepath.Join(dir, "espeak.wav"), filepath.Join(dir, "16k.wav")
	if b, err := exec.Command(espeak, "-v", "en-us", "-s", "150", "-w", raw, text).CombinedOutput(); err != nil {
		tb.Fatalf("espeak-ng: %v: %s", err, b)
	}
	args := append([]string{"-D", raw, "-r", "16000", "-b", "16", "-c", "1", out}, effects...)
	if b, err := exec.Command(sox, args...).CombinedOutput(); err != nil {
		tb.Fatalf("sox: %v: %s", err, b)
	}
	wav, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return wav
}

// pcmWAV builds a canonical WAV of 16-bit samples (interleaved when
// channels > 1).
func pcmWAV(samples []int16, rate, channels int) []byte {
	le := binary.LittleEndian
	b := []byte("RIFF")
	b = le.AppendUint32(b, uint32(36+2*len(samples)))
	b = append(b, "WAVEfmt "...)
	b = le.AppendUint32(b, 16)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, uint16(channels))
	b = le.AppendUint32(b, uint32(rate))
	b = le.AppendUint32(b, uint32(rate*channels*2))
	b = le.AppendUint16(b, uint16(channels*2))
	b = le.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = le.AppendUint32(b, uint32(2*len(samples)))
	for _, s := range samples {
		b = le.AppendUint16(b, uint16(s))
	}
	return b
}

// isolateTemp points os.TempDir at a fresh directory, so a test can check
// that the engine removed its temporary files.
func isolateTemp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	return dir
}

func checkNoLeftovers(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("temporary file left behind: %s", e.Name())
	}
}

// Process helpers, reading /proc (Linux). They only look at this test
// process's own children and their process groups.

type procInfo struct {
	pid, ppid int
	state     string
	argv0     string
}

func readProc(pid int) (procInfo, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// The command name is in parentheses and may contain spaces; the
	// fields after the last ')' are: state ppid …
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return procInfo{}, false
	}
	p := procInfo{pid: pid, state: fields[0]}
	p.ppid, _ = strconv.Atoi(fields[1])
	if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil {
		p.argv0, _, _ = strings.Cut(string(cmdline), "\x00")
	}
	return p, true
}

func allProcs() []procInfo {
	entries, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// childrenRunning lists this process's live (not zombie) children whose
// argv[0] is bin.
func childrenRunning(bin string) []int {
	var pids []int
	for _, p := range allProcs() {
		if p.ppid == os.Getpid() && p.argv0 == bin && p.state != "Z" {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

func waitForChild(t *testing.T, bin string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if pids := childrenRunning(bin); len(pids) == 1 {
			return pids[0]
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no child process %s appeared", bin)
	return 0
}

// waitGone waits until pid no longer runs. A zombie counts as gone: it is
// dead, and its reaping is up to its parent (init, for an orphan).
func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		p, ok := readProc(pid)
		if !ok || p.state == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("process %d (%s) still running, state %s", pid, p.argv0, p.state)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
