package asr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"koe/internal/proc"
	"koe/internal/quote"
	"koe/internal/wavio"
)

const (
	// sphinxRate is the only rate the en-us model (and so koe) feeds
	// pocketsphinx: it refuses anything else.
	sphinxRate = 16000
	// sphinxWaitDelay bounds how long Transcribe waits for the output pipes
	// after the process ended or was killed; nothing legitimate keeps them
	// open, so this only matters if something went badly wrong.
	sphinxWaitDelay = 2 * time.Second
	// sphinxMaxTranscript bounds what koe reads from stdout. A minute of
	// speech is about a kilobyte of text.
	sphinxMaxTranscript = 1 << 20
	// sphinxLogKeep is how much of the end of pocketsphinx's log (stderr)
	// is kept for error messages; the start is a long echo of settings.
	sphinxLogKeep = 16 << 10
	// sphinxLogQuote is how much of that log an error message quotes.
	sphinxLogQuote = 1024
)

// sphinxFormat is the only format pocketsphinx reads.
var sphinxFormat = wavio.Format{Tag: wavio.FormatPCM, Channels: 1, Rate: sphinxRate, Bits: 16}

// ErrNotWAV means the input is not a WAV file pocketsphinx can read:
// 16 kHz, 16-bit, mono integer PCM.
var ErrNotWAV = errors.New("not a 16 kHz 16-bit mono PCM WAV")

// pocketsphinx runs one pocketsphinx_continuous process per utterance. The
// process loads the model each time (about 0.3 s of the total), but an
// utterance is a second or more of work anyway, and separate processes keep
// utterances independent: a crash or a cancel affects only its own.
//
// The log is not sent to /dev/null (-logfn) but read from stderr: that is
// where pocketsphinx says why it failed (a wrong sample rate, a broken
// model); with -logfn /dev/null it just exits with status 1.
type pocketsphinx struct {
	path  string   // resolved when the engine is built
	model []string // -hmm, -dict, -lm: fixed for the engine's life
}

func newPocketsphinx(c PocketsphinxConfig) (*pocketsphinx, error) {
	path, err := exec.LookPath(c.Binary)
	if err != nil {
		return nil, fmt.Errorf("asr: pocketsphinx binary %q not found: install the Debian packages pocketsphinx and pocketsphinx-en-us (apt-get install pocketsphinx pocketsphinx-en-us), or set asr.pocketsphinx.binary to its path: %w", c.Binary, err)
	}
	// The acoustic model is a directory; its mdef file is the one
	// pocketsphinx opens first, so its presence tells a model from any
	// other directory.
	if err := checkModelFile("hmm", "acoustic model", c.HMM, "mdef"); err != nil {
		return nil, err
	}
	if err := checkModelFile("dict", "dictionary", c.Dict, ""); err != nil {
		return nil, err
	}
	if err := checkModelFile("lm", "language model", c.LM, ""); err != nil {
		return nil, err
	}
	return &pocketsphinx{
		path:  path,
		model: []string{"-hmm", c.HMM, "-dict", c.Dict, "-lm", c.LM},
	}, nil
}

// checkModelFile checks that path is a readable file, or, when inDir is
// set, a directory holding a file of that name.
func checkModelFile(key, what, path, inDir string) error {
	file := path
	if inDir != "" {
		file = filepath.Join(path, inDir)
	}
	f, err := os.Open(file)
	if err == nil {
		var fi os.FileInfo
		fi, err = f.Stat()
		f.Close()
		if err == nil && fi.IsDir() {
			err = errors.New("is a directory")
		}
	}
	if err != nil {
		return fmt.Errorf("asr: pocketsphinx %s asr.pocketsphinx.%s %q cannot be used: install the Debian package pocketsphinx-en-us (apt-get install pocketsphinx-en-us), or set asr.pocketsphinx.%s to the right path: %w", what, key, path, key, err)
	}
	return nil
}

func (p *pocketsphinx) Transcribe(ctx context.Context, wav []byte) (string, error) {
	if len(wav) == 0 {
		return "", ErrNoAudio
	}
	pcm, err := sphinxPCM(wav)
	if err != nil {
		return "", fmt.Errorf("asr: pocketsphinx input: %w", err)
	}
	if len(pcm) == 0 {
		return "", nil // an empty recording says nothing
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("asr: pocketsphinx: %w", err)
	}
	audio := time.Duration(len(pcm)/2) * time.Second / sphinxRate

	// pocketsphinx_continuous reads a file (its stdin mode expects raw
	// samples and has no end-of-utterance handling worth relying on).
	name, err := writeSphinxInput(pcm)
	if err != nil {
		return "", err
	}
	defer os.Remove(name)

	args := append(append([]string(nil), p.model...), "-infile", name)
	// A cancel kills the whole process group, so nothing the binary may
	// have started outlives the utterance.
	cmd := proc.Command(ctx, p.path, args...)
	stdout := &sphinxBuffer{limit: sphinxMaxTranscript}
	logBuf := &sphinxBuffer{limit: sphinxLogKeep, keepTail: true}
	cmd.Stdout, cmd.Stderr = stdout, logBuf
	cmd.WaitDelay = sphinxWaitDelay

	began := time.Now()
	err = cmd.Run()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return "", fmt.Errorf("asr: pocketsphinx: %w", ctxErr)
	}
	if stdout.overflow {
		return "", fmt.Errorf("asr: pocketsphinx wrote more than %d KB of text for %s of audio; refusing to buffer it", sphinxMaxTranscript>>10, audio)
	}
	if err != nil {
		return "", fmt.Errorf("asr: pocketsphinx (%s) failed on %s of audio: %w; log: %q", p.path, audio, err, sphinxLogErrors(logBuf.String()))
	}
	// One line per segment it heard; blank lines for segments of noise.
	text := strings.Join(strings.Fields(stdout.String()), " ")
	slog.Debug("pocketsphinx transcribed", "audio", audio, "took", time.Since(began), "chars", len(text))
	return text, nil
}

// sphinxPCM checks that wav is what pocketsphinx needs and returns its
// samples. It reads the RIFF chunks rather than assuming the canonical
// layout, because pocketsphinx would read any chunk after the header
// (LIST metadata, say) as audio; writeSphinxInput then gives pocketsphinx
// the samples alone behind a canonical header.
func sphinxPCM(wav []byte) ([]byte, error) {
	f, pcm, err := wavio.Parse(wav)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotWAV, err)
	}
	if f != sphinxFormat {
		return nil, fmt.Errorf("%w: it is %d Hz, %d channel(s), %d-bit, format tag %d", ErrNotWAV, f.Rate, f.Channels, f.Bits, f.Tag)
	}
	return pcm, nil
}

// writeSphinxInput writes pcm as a canonical WAV to a new temporary file and
// returns its name; the caller removes it.
func writeSphinxInput(pcm []byte) (string, error) {
	f, err := os.CreateTemp("", "koe-asr-*.wav")
	if err != nil {
		return "", fmt.Errorf("asr: pocketsphinx needs a temporary file for the audio: %w", err)
	}
	// pocketsphinx_continuous assumes the canonical header: it checks a few
	// fixed offsets and reads audio from byte 44 to the end of the file,
	// whatever chunks follow.
	_, err = f.Write(wavio.AppendHeader(nil, sphinxFormat, len(pcm)))
	if err == nil {
		_, err = f.Write(pcm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("asr: writing the audio for pocketsphinx to %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// sphinxLogErrors picks what explains a failure out of pocketsphinx's log:
// its ERROR and FATAL lines, or else the last lines.
func sphinxLogErrors(log string) string {
	var picked []string
	for line := range strings.Lines(log) {
		if strings.HasPrefix(line, "ERROR") || strings.HasPrefix(line, "FATAL") {
			picked = append(picked, strings.TrimSpace(line))
		}
	}
	out := strings.Join(picked, " ")
	if out == "" {
		out = strings.TrimSpace(log)
		if len(out) > sphinxLogQuote {
			out = "…" + out[len(out)-sphinxLogQuote:]
		}
	}
	return quote.Shorten(strings.ToValidUTF8(out, ""), sphinxLogQuote)
}

// sphinxBuffer collects a subprocess's output up to limit bytes. Past the
// limit it either keeps the most recent bytes (keepTail, for the log, which
// must not block the process and whose end says why it failed) or fails the
// write (for the transcript, where a partial result is useless and the
// failed write closes the pipe, stopping the process).
type sphinxBuffer struct {
	buf      []byte
	limit    int
	keepTail bool
	overflow bool
}

var errSphinxOutputTooLarge = errors.New("output too large")

func (b *sphinxBuffer) Write(p []byte) (int, error) {
	if len(b.buf)+len(p) <= b.limit {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	b.overflow = true
	if !b.keepTail {
		return 0, errSphinxOutputTooLarge
	}
	b.buf = append(b.buf, p...)
	// Shift only once the buffer holds twice the limit, so the copying
	// stays linear in the output.
	if len(b.buf) >= 2*b.limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
	}
	return len(p), nil
}

func (b *sphinxBuffer) String() string {
	s := b.buf
	if len(s) > b.limit {
		s = s[len(s)-b.limit:]
	}
	return string(s)
}
