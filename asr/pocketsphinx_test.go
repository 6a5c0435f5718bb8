package asr

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"koe/testkit/proctest"
)

// roundTripSentence and its key words: the round trip passes when
// pocketsphinx hears at least two of them. Its general model is weak on
// synthetic speech (it hears "whether" for "weather", say), so the test is
// loose, but two content words do not come out of noise.
const roundTripSentence = "the weather is nice today and I would like a cup of coffee"

var roundTripKeyWords = []string{"weather", "today", "like", "coffee", "cup", "nice"}

func newTestPocketsphinx(t testing.TB) Engine {
	t.Helper()
	needPocketsphinx(t)
	cfg := DefaultConfig()
	cfg.Timeout = 0 // the tests bound time themselves
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func keyWordsHeard(transcript string) []string {
	heard := map[string]bool{}
	for _, w := range strings.Fields(strings.ToLower(transcript)) {
		heard[w] = true
	}
	var out []string
	for _, k := range roundTripKeyWords {
		if heard[k] {
			out = append(out, k)
		}
	}
	return out
}

func TestPocketsphinxRoundTrip(t *testing.T) {
	e := newTestPocketsphinx(t)
	wav := speak(t, roundTripSentence)
	tmp := isolateTemp(t)
	began := time.Now()
	text, err := e.Transcribe(asrCtx(t), wav)
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	audio := time.Duration(len(wav)-44) / 2 * time.Second / 16000
	t.Logf("%s of speech transcribed in %s: %q", audio, took, text)
	if got := keyWordsHeard(text); len(got) < 2 {
		t.Errorf("transcript %q holds key words %v; want at least two of %v", text, got, roundTripKeyWords)
	}
	if text != strings.TrimSpace(text) || strings.Contains(text, "\n") || strings.Contains(text, "  ") {
		t.Errorf("transcript not normalised: %q", text)
	}
	checkNoLeftovers(t, tmp)
}

// TestPocketsphinxNonCanonicalWAV hands over the same speech wrapped in
// chunks pocketsphinx itself cannot skip (it reads everything after byte 44
// as audio) and with a streaming writer's placeholder size: the transcript
// must not change.
func TestPocketsphinxNonCanonicalWAV(t *testing.T) {
	e := newTestPocketsphinx(t)
	wav := speak(t, roundTripSentence)
	want, err := e.Transcribe(asrCtx(t), wav)
	if err != nil {
		t.Fatal(err)
	}
	pcm, err := sphinxPCM(wav)
	if err != nil {
		t.Fatal(err)
	}
	odd := riffFile(
		riffChunk{"LIST", []byte("INFOISFT\x05\x00\x00\x00koe!\x00"), 0}, // odd size: padded
		riffChunk{"fmt ", pcmWAV(nil, 16000, 1)[20:36], 0},
		riffChunk{"fact", []byte{0, 0, 0, 0}, 0},
		riffChunk{id: "data", body: pcm, size: 0xFFFFFFFF},
	)
	got, err := e.Transcribe(asrCtx(t), odd)
	if err != nil || got != want {
		t.Errorf("non-canonical file: %q, %v; canonical: %q", got, err, want)
	}
	// A LIST chunk after the data must not be heard as audio either.
	trailer := append(bytes.Clone(wav), riffFile(riffChunk{"LIST", bytes.Repeat([]byte("noise!"), 5000), 0})[12:]...)
	binary.LittleEndian.PutUint32(trailer[4:], uint32(len(trailer)-8))
	if got, err := sphinxPCM(trailer); err != nil || !bytes.Equal(got, pcm) {
		t.Errorf("trailing chunk: %d bytes of audio, %v; want %d", len(got), err, len(pcm))
	}
}

type riffChunk struct {
	id   string
	body []byte
	size uint32 // 0: len(body)
}

func riffFile(chunks ...riffChunk) []byte {
	le := binary.LittleEndian
	b := []byte("RIFF\x00\x00\x00\x00WAVE")
	for _, c := range chunks {
		size := c.size
		if size == 0 {
			size = uint32(len(c.body))
		}
		b = append(b, c.id...)
		b = le.AppendUint32(b, size)
		b = append(b, c.body...)
		if len(c.body)%2 == 1 {
			b = append(b, 0)
		}
	}
	le.PutUint32(b[4:], uint32(len(b)-8))
	return b
}

func TestPocketsphinxSilence(t *testing.T) {
	e := newTestPocketsphinx(t)
	text, err := e.Transcribe(asrCtx(t), pcmWAV(make([]int16, 16000), 16000, 1))
	if err != nil || text != "" {
		t.Errorf("a second of silence: %q, %v; want \"\"", text, err)
	}
	// No samples at all: nothing to run pocketsphinx on.
	if text, err := e.Transcribe(asrCtx(t), pcmWAV(nil, 16000, 1)); err != nil || text != "" {
		t.Errorf("empty data chunk: %q, %v", text, err)
	}
	if _, err := e.Transcribe(asrCtx(t), nil); !errors.Is(err, ErrNoAudio) {
		t.Errorf("no bytes: err = %v, want ErrNoAudio", err)
	}
}

func TestPocketsphinxRejectsOtherFormats(t *testing.T) {
	// A fake binary: these inputs must be refused before any process runs.
	cfg := fakePocketsphinx(t, "echo ran; exit 1")
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	stereo := pcmWAV(make([]int16, 200), 16000, 2)
	eightBit := pcmWAV(make([]int16, 200), 16000, 1)
	binary.LittleEndian.PutUint16(eightBit[34:], 8)
	float := pcmWAV(make([]int16, 200), 16000, 1)
	binary.LittleEndian.PutUint16(float[20:], 3)
	for name, tc := range map[string]struct {
		wav  []byte
		want string
	}{
		"22 kHz":      {pcmWAV(make([]int16, 200), 22050, 1), "22050 Hz"},
		"stereo":      {stereo, "2 channel"},
		"8 bit":       {eightBit, "8-bit"},
		"float":       {float, "format tag 3"},
		"not RIFF":    {[]byte("ID3\x04 an mp3, perhaps"), "RIFF"},
		"no fmt":      {riffFile(riffChunk{"data", []byte{1, 2}, 0}), "before any fmt"},
		"no data":     {riffFile(riffChunk{"fmt ", pcmWAV(nil, 16000, 1)[20:36], 0}), "no data chunk"},
		"cut fmt":     {riffFile(riffChunk{"fmt ", []byte{1, 0, 1, 0}, 0}), "truncated"},
		"header only": {[]byte("RIFF\x04\x00\x00\x00WAVE"), "no fmt chunk"},
	} {
		_, err := e.Transcribe(asrCtx(t), tc.wav)
		if !errors.Is(err, ErrNotWAV) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrNotWAV mentioning %q", name, err, tc.want)
		}
	}
}

// fakePocketsphinx writes a shell script standing in for
// pocketsphinx_continuous, and model files for New's checks.
func fakePocketsphinx(t *testing.T, script string) Config {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "pocketsphinx_continuous")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hmm := filepath.Join(dir, "en-us")
	if err := os.Mkdir(hmm, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(hmm, "mdef"), filepath.Join(dir, "dict"), filepath.Join(dir, "lm")} {
		if err := os.WriteFile(f, []byte("model"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Timeout = 0
	cfg.Pocketsphinx = PocketsphinxConfig{Binary: bin, HMM: hmm, Dict: filepath.Join(dir, "dict"), LM: filepath.Join(dir, "lm")}
	return cfg
}

// TestPocketsphinxInvocation checks, with a stand-in binary, the arguments,
// the canonical file it gets, and how segments on several lines are joined.
func TestPocketsphinxInvocation(t *testing.T) {
	dir := t.TempDir()
	args, input := filepath.Join(dir, "args"), filepath.Join(dir, "input.wav")
	cfg := fakePocketsphinx(t, `printf '%s\n' "$@" > `+args+`
cp "$8" `+input+`
printf '\nhello there\n\n   general   kenobi  \n\n'`)
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	samples := []int16{1, -2, 3, -4, 5, 32767, -32768}
	tmp := isolateTemp(t)
	text, err := e.Transcribe(asrCtx(t), pcmWAV(samples, 16000, 1))
	if err != nil || text != "hello there general kenobi" {
		t.Errorf("Transcribe = %q, %v", text, err)
	}
	b, err := os.ReadFile(args)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(b))
	c := cfg.Pocketsphinx
	want := []string{"-hmm", c.HMM, "-dict", c.Dict, "-lm", c.LM, "-infile"}
	if len(got) != 8 || strings.Join(got[:7], " ") != strings.Join(want, " ") || !strings.HasPrefix(filepath.Base(got[7]), "koe-asr-") {
		t.Errorf("arguments %q", got)
	}
	if in, err := os.ReadFile(input); err != nil || !bytes.Equal(in, pcmWAV(samples, 16000, 1)) {
		t.Errorf("pocketsphinx got %q (%v), want the canonical WAV", in, err)
	}
	checkNoLeftovers(t, tmp)
}

func TestPocketsphinxFailure(t *testing.T) {
	// The log is long; what explains the failure is in its ERROR and
	// FATAL lines, near the end.
	cfg := fakePocketsphinx(t, `i=0; while [ $i -lt 500 ]; do echo "INFO: cmd_ln.c(702): Parsing command line: setting $i" >&2; i=$((i+1)); done
echo 'ERROR: "continuous.c", line 136: Input audio file has sample rate [8000]' >&2
echo 'FATAL: "continuous.c", line 165: Failed to process file' >&2
echo "INFO: bye" >&2
exit 3`)
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Transcribe(asrCtx(t), pcmWAV(make([]int16, 1600), 16000, 1))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"exit status 3", "sample rate [8000]", "Failed to process file", cfg.Pocketsphinx.Binary} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "setting 1") || len(err.Error()) > 1500 {
		t.Errorf("error quotes the whole log (%d bytes)", len(err.Error()))
	}

	// The real binary with a broken model says what is wrong.
	needPocketsphinx(t)
	cfg.Pocketsphinx.Binary = "pocketsphinx_continuous"
	if err := os.WriteFile(filepath.Join(cfg.Pocketsphinx.HMM, "mdef"), []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err = New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Transcribe(asrCtx(t), pcmWAV(make([]int16, 1600), 16000, 1))
	if err == nil || !strings.Contains(err.Error(), "exit status") || !strings.Contains(err.Error(), "FATAL") || !strings.Contains(err.Error(), "mdef.c") {
		t.Errorf("broken model: err = %v, want the exit status and pocketsphinx's complaint about mdef", err)
	}
	t.Logf("broken model: %v", err)
}

func TestPocketsphinxMissingBinary(t *testing.T) {
	for _, bin := range []string{"koe-no-such-pocketsphinx", filepath.Join(t.TempDir(), "pocketsphinx_continuous")} {
		cfg := DefaultConfig()
		cfg.Pocketsphinx.Binary = bin
		_, err := New(cfg, nil)
		if err == nil {
			t.Fatalf("%s: New succeeded", bin)
		}
		for _, want := range []string{bin, "Debian packages pocketsphinx and pocketsphinx-en-us", "asr.pocketsphinx.binary"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	}
}

func TestPocketsphinxMissingModel(t *testing.T) {
	for _, tc := range []struct {
		key   string
		spoil func(c *PocketsphinxConfig)
	}{
		{"hmm", func(c *PocketsphinxConfig) { c.HMM = filepath.Join(c.HMM, "no-such-model") }},
		{"hmm", func(c *PocketsphinxConfig) { os.Remove(filepath.Join(c.HMM, "mdef")) }},
		{"dict", func(c *PocketsphinxConfig) { c.Dict += ".missing" }},
		{"dict", func(c *PocketsphinxConfig) { c.Dict = c.HMM }}, // a directory
		{"lm", func(c *PocketsphinxConfig) { c.LM = "/nonexistent/en-us.lm.bin" }},
	} {
		cfg := fakePocketsphinx(t, "exit 0")
		tc.spoil(&cfg.Pocketsphinx)
		_, err := New(cfg, nil)
		if err == nil {
			t.Errorf("%s: New succeeded", tc.key)
			continue
		}
		for _, want := range []string{"asr.pocketsphinx." + tc.key, "Debian package pocketsphinx-en-us"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not mention %q", tc.key, err, want)
			}
		}
	}
}

// longSpeech is about 30 s of speech: pocketsphinx takes seconds on it.
func longSpeech(t *testing.T) []byte {
	t.Helper()
	wav := speak(t, strings.Repeat(roundTripSentence+". ", 8))
	if d := time.Duration(len(wav)-44) / 2 * time.Second / 16000; d < 25*time.Second {
		t.Fatalf("only %s of speech", d)
	}
	return wav
}

func TestPocketsphinxCancel(t *testing.T) {
	bin := needPocketsphinx(t)
	e := newTestPocketsphinx(t)
	wav := longSpeech(t)
	tmp := isolateTemp(t)
	var pid int
	proctest.CancelAndWait(t, asrCtx(t), func(ctx context.Context) error {
		_, err := e.Transcribe(ctx, wav)
		return err
	}, func() {
		// Cancel once pocketsphinx has loaded its model and opened the
		// audio: busy decoding, not still starting.
		pid = proctest.WaitForChild(t, os.Getpid(), bin)
		proctest.WaitOpened(t, pid, "koe-asr-")
	})
	// Transcribe reaped its child before it returned.
	if proctest.Alive(pid) {
		t.Errorf("pocketsphinx (pid %d) still runs", pid)
	}
	if pids := proctest.Children(os.Getpid(), bin); len(pids) > 0 {
		t.Errorf("pocketsphinx processes left behind: %v", pids)
	}
	checkNoLeftovers(t, tmp)

	// A context that has already ended starts nothing.
	ended, cancel := context.WithCancel(asrCtx(t))
	cancel()
	if _, err := e.Transcribe(ended, wav); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: err = %v", err)
	}
}

// TestPocketsphinxCancelKillsProcessGroup runs pocketsphinx behind a shell
// wrapper that does not exec it, and gives it a FIFO nobody writes for its
// audio, so that it never ends on its own. Killing only the shell would
// orphan the recogniser, which would wait on the FIFO for ever; the whole
// group must go.
func TestPocketsphinxCancelKillsProcessGroup(t *testing.T) {
	bin := needPocketsphinx(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "never")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "pocketsphinx-wrapper")
	script := `#!/bin/sh
prev=
for a do
	shift
	if [ "$prev" = -infile ]; then a=` + fifo + `; fi
	set -- "$@" "$a"
	prev=$a
done
` + bin + ` "$@"
echo done >&2
`
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Timeout = 0
	cfg.Pocketsphinx.Binary = wrapper
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var shell, engine int
	proctest.CancelAndWait(t, asrCtx(t), func(ctx context.Context) error {
		_, err := e.Transcribe(ctx, utterance)
		return err
	}, func() {
		shell = proctest.WaitForChild(t, os.Getpid(), "/bin/sh")
		engine = proctest.WaitForChild(t, shell, bin)
	})
	proctest.WaitGone(t, shell)
	proctest.WaitGone(t, engine)
}

func TestPocketsphinxTimeout(t *testing.T) {
	bin := needPocketsphinx(t)
	cfg := DefaultConfig()
	cfg.Timeout = 300 * time.Millisecond // a fraction of the seconds longSpeech takes
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	wav := longSpeech(t)
	_, err = e.Transcribe(asrCtx(t), wav)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "asr.timeout") {
		t.Errorf("err = %v, want DeadlineExceeded naming asr.timeout", err)
	}
	// Transcribe reaped its child before it returned.
	if pids := proctest.Children(os.Getpid(), bin); len(pids) > 0 {
		t.Errorf("pocketsphinx still running after the timeout: %v", pids)
	}
}

// BenchmarkPocketsphinx3s is the latency of one real transcription of a
// 3-second utterance: temporary file, process start, model load, decoding.
func BenchmarkPocketsphinx3s(b *testing.B) {
	e := newTestPocketsphinx(b)
	// Exactly 3 s: speech, padded with silence and cut.
	wav := speak(b, "please tell me what the weather will be like tomorrow", "pad", "0", "1", "trim", "0", "3")
	if n := (len(wav) - 44) / 2; n != 3*16000 {
		b.Fatalf("%d samples, want 3 s", n)
	}
	var text string
	for b.Loop() {
		var err error
		if text, err = e.Transcribe(b.Context(), wav); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(3*time.Second), "xRT")
	b.Logf("transcript: %q", text)
}
