package tts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"koe/internal/proc"
)

// espeakWaitDelay bounds how long Synthesize waits for espeak-ng's output
// pipes after the process ended or was killed; nothing legitimate keeps
// them open, so this only matters if something went badly wrong.
const espeakWaitDelay = 2 * time.Second

// stderrKeep is how much of espeak-ng's stderr an error quotes.
const stderrKeep = 1024

// espeak runs one espeak-ng process per synthesis. A process per sentence
// costs a few milliseconds and keeps sentences independent: a crash or a
// cancel affects only its own sentence.
type espeak struct {
	path string   // resolved when the engine is built
	args []string // fixed for the engine's life
}

func newEspeak(c EspeakConfig) (*espeak, error) {
	path, err := exec.LookPath(c.Binary)
	if err != nil {
		return nil, fmt.Errorf("tts: espeak-ng binary %q not found: install the Debian package espeak-ng (apt-get install espeak-ng), or set tts.espeak_ng.binary to its path: %w", c.Binary, err)
	}
	return &espeak{
		path: path,
		// -b 1: the input is UTF-8. The text itself goes to stdin, never
		// into argv, so text such as "-v" or "--help" is spoken rather
		// than read as an option.
		args: []string{"--stdout", "-b", "1",
			"-v", c.Voice, "-s", strconv.Itoa(c.Rate), "-p", strconv.Itoa(c.Pitch)},
	}, nil
}

func (e *espeak) Synthesize(ctx context.Context, text string) (Audio, error) {
	if strings.TrimSpace(text) == "" {
		return Audio{}, errEmptyText
	}
	if err := ctx.Err(); err != nil {
		return Audio{}, fmt.Errorf("tts: espeak-ng: %w", err)
	}
	// A cancel kills the whole process group, so nothing espeak-ng may
	// have started outlives the sentence.
	cmd := proc.Command(ctx, e.path, e.args...)
	// Invalid UTF-8 would contradict -b 1; replace it rather than let
	// espeak-ng guess.
	cmd.Stdin = strings.NewReader(strings.ToValidUTF8(text, "\uFFFD"))
	// Room for a typical sentence (3 s at 22 kHz is 130 KB) up front.
	stdout := &cappedBuffer{buf: make([]byte, 0, 192<<10), limit: maxAudioBytes}
	stderr := &cappedBuffer{limit: stderrKeep, truncate: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = espeakWaitDelay

	err := cmd.Run()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Audio{}, fmt.Errorf("tts: espeak-ng: %w", ctxErr)
	}
	if stdout.overflow {
		return Audio{}, fmt.Errorf("tts: espeak-ng: more than %d MB of audio for %d characters of text; refusing to buffer it", maxAudioBytes>>20, len(text))
	}
	if err != nil {
		return Audio{}, fmt.Errorf("tts: espeak-ng (%s %s) failed: %w; stderr: %q", e.path, strings.Join(e.args, " "), err, stderr.String())
	}
	if stderr.Len() > 0 {
		// espeak-ng warns on stderr and still speaks (for example about
		// a voice variant it could not find); worth seeing when debugging.
		slog.Debug("espeak-ng wrote to stderr", "stderr", stderr.String())
	}
	a, err := Normalize(stdout.Bytes())
	if err != nil {
		return Audio{}, fmt.Errorf("tts: espeak-ng output: %w", err)
	}
	return a, nil
}

// cappedBuffer collects a subprocess's output up to limit bytes. Past the
// limit it either keeps the head and discards the rest (truncate, for
// stderr, which must not block the process) or fails the write (for audio,
// where a partial result is useless and the failed write closes the pipe,
// stopping the process).
type cappedBuffer struct {
	buf      []byte
	limit    int
	truncate bool
	overflow bool
}

var errOutputTooLarge = errors.New("output too large")

func (b *cappedBuffer) Write(p []byte) (int, error) {
	room := b.limit - len(b.buf)
	if len(p) <= room {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	b.overflow = true
	if b.truncate {
		b.buf = append(b.buf, p[:max(room, 0)]...)
		return len(p), nil
	}
	return 0, errOutputTooLarge
}

func (b *cappedBuffer) Bytes() []byte { return b.buf }
func (b *cappedBuffer) Len() int      { return len(b.buf) }

func (b *cappedBuffer) String() string {
	s := strings.TrimSpace(string(b.buf))
	if b.overflow && b.truncate {
		s += "…"
	}
	return s
}
