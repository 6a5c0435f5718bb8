package tts

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"koe/internal/proc"
)

// SynthesizeStream runs espeak-ng as Synthesize does (its own process
// group, the text on stdin, stderr capped) but reads the WAV it writes to
// stdout as it goes: espeak-ng writes a header with a placeholder length
// first, then the audio clause by clause.
func (e *espeak) SynthesizeStream(ctx context.Context, text string) (*Stream, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errEmptyText
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tts: espeak-ng: %w", err)
	}
	// The stream's own context: Close before the end kills the process
	// group, as a cancel of ctx does.
	ctx, cancel := context.WithCancel(ctx)
	cmd := proc.Command(ctx, e.path, e.args...)
	cmd.Stdin = strings.NewReader(strings.ToValidUTF8(text, "\uFFFD"))
	stderr := &cappedBuffer{limit: stderrKeep, truncate: true}
	cmd.Stderr = stderr
	cmd.WaitDelay = espeakWaitDelay
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("tts: espeak-ng: %w", err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("tts: espeak-ng (%s) did not start: %w", e.path, err)
	}
	waited := false
	wait := func() error {
		if waited {
			return nil
		}
		waited = true
		return cmd.Wait()
	}
	failed := func(err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("tts: espeak-ng: %w", ctxErr)
		}
		return fmt.Errorf("tts: espeak-ng (%s %s) failed: %w; stderr: %q", e.path, strings.Join(e.args, " "), err, stderr.String())
	}
	s, err := newWAVStream(stdout)
	if err != nil {
		cancel()
		werr := wait()
		if ctx.Err() == nil && werr != nil {
			return nil, failed(werr)
		}
		return nil, failed(fmt.Errorf("its output: %w", err))
	}
	s.who = "tts: espeak-ng"
	s.fail = failed
	// At the end of its output the process has ended or is about to: its
	// exit status decides whether the speech was whole.
	s.done = func() error {
		// Killed or cancelled, it ended early: the speech is not whole.
		if err := wait(); err != nil || ctx.Err() != nil {
			return failed(err)
		}
		if stderr.Len() > 0 {
			slog.Debug("espeak-ng wrote to stderr", "stderr", stderr.String())
		}
		return nil
	}
	s.closer = func() error {
		cancel()
		// Killed, it exits with a signal; that is the point of Close.
		_ = wait()
		return nil
	}
	return s, nil
}
