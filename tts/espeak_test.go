package tts

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func newTestEspeak(t testing.TB) Engine {
	t.Helper()
	espeakBinary(t)
	cfg := DefaultConfig()
	cfg.Timeout = 0 // the tests bound time themselves
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func TestEspeakSynthesize(t *testing.T) {
	e := newTestEspeak(t)
	a, err := e.Synthesize(testCtx(t), "The quick brown fox jumps over the lazy dog.")
	if err != nil {
		t.Fatal(err)
	}
	checkWAV(t, a)
	if a.SampleRate != 22050 {
		t.Errorf("sample rate %d, want 22050", a.SampleRate)
	}
	if a.Duration < time.Second || a.Duration > 6*time.Second {
		t.Errorf("duration %v, want 1..6 s for nine words", a.Duration)
	}
	v := Volumes(a.Samples, a.SampleRate, 20)
	if want := int(math.Ceil(float64(a.Duration) / float64(20*time.Millisecond))); len(v) != want {
		t.Errorf("%d volumes, want ceil(%v / 20ms) = %d", len(v), a.Duration, want)
	}
	top, quiet, loud := 0.0, 0, 0
	for _, x := range v {
		top = max(top, x)
		if x < 0.2 {
			quiet++
		}
		if x > 0.5 {
			loud++
		}
	}
	if top != 1 {
		t.Errorf("loudest volume = %g, want 1", top)
	}
	// Speech has pauses and stresses: a flat envelope would mean noise or
	// a broken decode.
	if quiet < len(v)/20 || loud < len(v)/10 {
		t.Errorf("volumes lack variation: %d quiet and %d loud of %d", quiet, loud, len(v))
	}
	t.Logf("%d samples, %v, %d volumes", len(a.Samples), a.Duration, len(v))
}

// TestEspeakOptionLikeText proves the text never reaches espeak-ng's option
// parser: "--help" as an option prints usage (not a WAV) and "-v" alone is a
// usage error, so getting speech back means they were spoken.
func TestEspeakOptionLikeText(t *testing.T) {
	e := newTestEspeak(t)
	for _, text := range []string{"-v", "--help", "-x --stdout", "--version"} {
		a, err := e.Synthesize(testCtx(t), text)
		if err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		checkWAV(t, a)
		if a.Duration < 200*time.Millisecond {
			t.Errorf("%q: only %v of audio", text, a.Duration)
		}
	}
}

func TestEspeakOddText(t *testing.T) {
	e := newTestEspeak(t)
	for _, text := range []string{"", "   ", "\n\t "} {
		if _, err := e.Synthesize(testCtx(t), text); err == nil {
			t.Errorf("%q: no error for text with nothing to say", text)
		}
	}
	// Invalid UTF-8, SSML-looking text and several lines still speak.
	for _, text := range []string{"caf\xe9 au lait", "<speak>not markup</speak>", "one.\ntwo.\n\nthree."} {
		a, err := e.Synthesize(testCtx(t), text)
		if err != nil || a.Duration < 200*time.Millisecond {
			t.Errorf("%q: %v, %v", text, err, a.Duration)
		}
	}
}

func TestEspeakMissingBinary(t *testing.T) {
	for _, bin := range []string{"koe-no-such-espeak-ng", filepath.Join(t.TempDir(), "espeak-ng")} {
		cfg := DefaultConfig()
		cfg.Espeak.Binary = bin
		_, err := New(cfg, nil)
		if err == nil {
			t.Fatalf("%s: New succeeded", bin)
		}
		for _, want := range []string{bin, "Debian package espeak-ng", "tts.espeak_ng.binary"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	}
}

func TestEspeakFailure(t *testing.T) {
	espeakBinary(t)
	cfg := DefaultConfig()
	cfg.Espeak.Voice = "xx-no-such-voice"
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Synthesize(testCtx(t), "hello")
	if err == nil || !strings.Contains(err.Error(), "voice does not exist") || !strings.Contains(err.Error(), "exit status") {
		t.Errorf("err = %v, want the exit status and espeak-ng's stderr", err)
	}
}

// longText is about 3000 words: a few seconds of synthesis, minutes of audio.
func longText() string {
	return strings.Repeat("This sentence is here only to keep the speech engine busy for a while. ", 220)
}

func TestEspeakCancel(t *testing.T) {
	bin := espeakBinary(t)
	e := newTestEspeak(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := e.Synthesize(ctx, longText())
		errc <- err
	}()
	// Wait until espeak-ng runs, so the cancel hits a live process.
	pid := waitForChild(t, bin)
	cancel()
	began := time.Now()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if d := time.Since(began); d > time.Second {
			t.Errorf("Synthesize returned %v after the cancel", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Synthesize did not return after the cancel")
	}
	waitGone(t, pid, 500*time.Millisecond)
	if pids := childrenRunning(bin); len(pids) > 0 {
		t.Errorf("espeak-ng processes left behind: %v", pids)
	}
}

// TestEspeakCancelKillsProcessGroup runs espeak-ng behind a shell wrapper
// that does not exec it, the way distribution wrappers often look. Killing
// only the shell would orphan espeak-ng, which would keep running and keep
// the output pipe open; the whole group must go.
func TestEspeakCancelKillsProcessGroup(t *testing.T) {
	bin := espeakBinary(t)
	wrapper := filepath.Join(t.TempDir(), "espeak-wrapper")
	script := "#!/bin/sh\n" + bin + " \"$@\"\necho done >&2\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Espeak.Binary = wrapper
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := e.Synthesize(ctx, longText())
		errc <- err
	}()
	shell := waitForChild(t, "/bin/sh")
	// The real engine is the shell's child.
	var engine int
	deadline := time.Now().Add(5 * time.Second)
	for engine == 0 {
		if time.Now().After(deadline) {
			t.Fatal("espeak-ng never started under the wrapper")
		}
		for _, p := range allProcs() {
			if p.ppid == shell && p.argv0 == bin {
				engine = p.pid
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	began := time.Now()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		// Without the group kill, the orphan would hold stdout open and
		// Synthesize would wait for WaitDelay (2 s).
		if d := time.Since(began); d > time.Second {
			t.Errorf("Synthesize returned %v after the cancel", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Synthesize did not return after the cancel")
	}
	// SIGKILL takes effect at once; an orphan would still be speaking.
	waitGone(t, shell, 500*time.Millisecond)
	waitGone(t, engine, 500*time.Millisecond)
}

func TestEspeakTimeout(t *testing.T) {
	espeakBinary(t)
	cfg := DefaultConfig()
	cfg.Timeout = 100 * time.Millisecond
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = e.Synthesize(testCtx(t), longText())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "tts.timeout") {
		t.Errorf("err = %v, want DeadlineExceeded naming tts.timeout", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("took %v with a 100ms timeout", d)
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
