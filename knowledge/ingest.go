package knowledge

import (
	"context"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"koe/internal/quote"
)

// What reading one file may cost: these bound every file read, for a
// character's knowledge base or for one conversation, so that a hostile
// file costs at most a bounded share of one core for a bounded time.

// startIngest takes one of the knowledge.max_concurrent_ingests places,
// or refuses name when all are taken. The returned ctx ends with ctx or
// when the service closes; done gives the place back.
func (s *Service) startIngest(ctx context.Context, name string) (context.Context, func(), error) {
	select {
	case s.ingests <- struct{}{}:
	default:
		return nil, nil, &FileError{Filename: name, Kind: ErrKindOverloaded, Reason: fmt.Sprintf(
			"koe is already reading as many files as knowledge.max_concurrent_ingests allows (%d); send it again in a few seconds", cap(s.ingests))}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.ingests
		return nil, nil, fmt.Errorf("knowledge: reading %s: %w", name, context.Canceled)
	}
	s.ingesting.Add(1)
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		<-s.ingests
		s.ingesting.Done()
	}, nil
}

// errIngestTimeout is why a reading's context ended at its time budget.
var errIngestTimeout = errors.New("knowledge.ingest_timeout is over")

// read runs work, the reading of file name (extracting, counting and
// chunking its text), within knowledge.ingest_timeout; running out of
// it refuses the file. ctx ending is not a refusal: its error is
// returned as it is.
func (s *Service) read(ctx context.Context, name string, work func(context.Context) error) error {
	rctx, cancel := context.WithTimeoutCause(ctx, s.cfg.IngestTimeout, errIngestTimeout)
	defer cancel()
	err := work(rctx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(rctx), errIngestTimeout) {
		return &FileError{Filename: name, Kind: ErrKindTimeout, Reason: fmt.Sprintf(
			"reading it took longer than knowledge.ingest_timeout allows (%s); split it into smaller files", s.cfg.IngestTimeout)}
	}
	return err
}

// countDocument counts a file's tokens, refusing it past
// knowledge.max_document_tokens.
func (s *Service) countDocument(ctx context.Context, name, text string, count func(string) int) (int, error) {
	n, over, err := countWithin(ctx, count, text, s.cfg.MaxDocumentTokens)
	if err != nil {
		return 0, err
	}
	if over {
		return 0, &FileError{Filename: name, Kind: ErrKindTooLong, Reason: fmt.Sprintf(
			"it is more than %s tokens long, the most knowledge.max_document_tokens allows; split it into smaller files", quote.Thousands(s.cfg.MaxDocumentTokens))}
	}
	return n, nil
}

// countStretch is how much text is counted at once: small enough that
// the count stops soon after it passes its limit, and that ctx is
// checked often (a stretch of one long word is the slowest to count).
const countStretch = 64 << 10

// countWithin counts text's tokens a stretch at a time, and stops once
// they pass limit (over). Counting a file whole would cost its whole
// length before the limit could refuse it.
func countWithin(ctx context.Context, count func(string) int, text string, limit int) (n int, over bool, err error) {
	for text != "" {
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
		cut := stretchEnd(text, countStretch)
		n += count(text[:cut])
		if n > limit {
			return n, true, nil
		}
		text = text[cut:]
	}
	return n, false, nil
}

// stretchEnd is where to cut text so that the head holds at most limit
// bytes: before a space that follows something else, where the
// tokenizers koe uses always end a token, so that the stretches' counts
// add up to the text's; failing that (one long word), between two
// characters.
func stretchEnd(text string, limit int) int {
	if len(text) <= limit {
		return len(text)
	}
	for i := limit; i > limit/2; i-- {
		if text[i] != ' ' {
			continue
		}
		if prev, _ := utf8.DecodeLastRuneInString(text[:i]); !unicode.IsSpace(prev) {
			return i
		}
	}
	if cut := runeBoundary(text, limit); cut > 0 {
		return cut
	}
	_, n := utf8.DecodeRuneInString(text)
	return n
}
