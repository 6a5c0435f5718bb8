package asr

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"koe/testkit/proctest"
)

// asrCtx bounds a test that runs real recognisers (pocketsphinx takes
// seconds on long input, more under the race detector's load).
func asrCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// needPocketsphinx returns pocketsphinx_continuous's path, after checking
// that the default model (pocketsphinx-en-us) is installed too.
func needPocketsphinx(tb testing.TB) string {
	tb.Helper()
	bin := proctest.LookPath(tb, "pocketsphinx_continuous", "pocketsphinx")
	c := DefaultConfig().Pocketsphinx
	for _, f := range []string{filepath.Join(c.HMM, "mdef"), c.Dict, c.LM} {
		if _, err := os.Stat(f); err != nil {
			proctest.Missing(tb, "the pocketsphinx model is not installed (Debian package pocketsphinx-en-us)", err)
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
	espeak := proctest.LookPath(tb, "espeak-ng", "espeak-ng")
	sox := proctest.LookPath(tb, "sox", "sox")
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
