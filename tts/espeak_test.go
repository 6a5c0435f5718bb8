package tts

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/testkit/proctest"
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
	var pid int
	proctest.CancelAndWait(t, testCtx(t), func(ctx context.Context) error {
		_, err := e.Synthesize(ctx, longText())
		return err
	}, func() {
		// Wait until espeak-ng runs, so the cancel hits a live process.
		pid = proctest.WaitForChild(t, os.Getpid(), bin)
	})
	// Synthesize reaped its child before it returned.
	if proctest.Alive(pid) {
		t.Errorf("espeak-ng (pid %d) still runs", pid)
	}
	if pids := proctest.Children(os.Getpid(), bin); len(pids) > 0 {
		t.Errorf("espeak-ng processes left behind: %v", pids)
	}
}

// TestEspeakCancelKillsProcessGroup runs espeak-ng behind a shell wrapper
// that does not exec it, the way distribution wrappers often look, and
// feeds it from a "sleep" that never writes, so that it never ends on its
// own. Killing only the shell would orphan espeak-ng, which would wait for
// its text for ever; the whole group must go.
func TestEspeakCancelKillsProcessGroup(t *testing.T) {
	bin := espeakBinary(t)
	sleep := proctest.LookPath(t, "sleep", "coreutils")
	wrapper := filepath.Join(t.TempDir(), "espeak-ng-wrapper")
	script := "#!/bin/sh\n" + sleep + " 3600 | " + bin + " \"$@\"\necho done >&2\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Timeout = 0
	cfg.Espeak.Binary = wrapper
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var shell, engine, feeder int
	proctest.CancelAndWait(t, testCtx(t), func(ctx context.Context) error {
		_, err := e.Synthesize(ctx, "hello")
		return err
	}, func() {
		shell = proctest.WaitForChild(t, os.Getpid(), "/bin/sh")
		// The real engine and what feeds it are the shell's children.
		engine = proctest.WaitForChild(t, shell, bin)
		feeder = proctest.WaitForChild(t, shell, sleep)
	})
	proctest.WaitGone(t, shell)
	proctest.WaitGone(t, engine)
	proctest.WaitGone(t, feeder)
}

func TestEspeakTimeout(t *testing.T) {
	bin := espeakBinary(t)
	cfg := DefaultConfig()
	cfg.Timeout = 100 * time.Millisecond // a fraction of the seconds longText takes
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Synthesize(testCtx(t), longText())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "tts.timeout") {
		t.Errorf("err = %v, want DeadlineExceeded naming tts.timeout", err)
	}
	// Synthesize reaped its child before it returned.
	if pids := proctest.Children(os.Getpid(), bin); len(pids) > 0 {
		t.Errorf("espeak-ng still running after the timeout: %v", pids)
	}
}
