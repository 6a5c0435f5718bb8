package recall

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"koe"
)

// readBatch is how many records the indexer reads (and saves) at a time.
const readBatch = 256

// backfillBatch bounds the vectors made for older entries per pass, so
// that a character gaining an embeddings endpoint does not hold up the
// indexing of new messages.
const backfillBatch = 256

// indexHistory indexes a history's records past its mark and its
// summaries, tells the other instances if it stored any, then makes
// vectors that are missing.
func (s *Service) indexHistory(ctx context.Context, conf, uid string) error {
	c, err := s.indexRecords(ctx, conf, uid)
	if c == nil || err != nil {
		return err
	}
	return s.backfill(ctx, conf, uid, c)
}

// indexRecords is indexHistory up to the vectors of older entries: it
// returns the history's character, or nil when the history is gone
// (nothing to backfill). Different histories' indexRecords may run at
// the same time (indexNoted); one history's never do.
func (s *Service) indexRecords(ctx context.Context, conf, uid string) (*character, error) {
	c, err := s.character(ctx, conf)
	if err != nil {
		return nil, err
	}
	// Only this history's mark: reading every history's would cost a
	// character with many conversations a scan per message.
	mark, _, err := s.opts.Store.RecallMark(ctx, conf, uid)
	if err != nil {
		return nil, err
	}
	// Another instance may have indexed past what this index holds:
	// take its entries, so that this one's follow them.
	takeStored := func() (bool, error) {
		vectors, err := s.storedVectorsUsable(ctx, conf)
		if err != nil {
			return false, err
		}
		_, gone, err := s.takeStored(ctx, conf, uid, c, vectors)
		return gone, err
	}
	if mark.Seq > c.lastSeq(uid) {
		if gone, err := takeStored(); gone || err != nil {
			return nil, err
		}
	}
	stored := false
	for {
		recs, err := s.opts.Store.Since(ctx, conf, uid, mark.Seq, readBatch)
		if errors.Is(err, koe.ErrNotFound) {
			c.dropHistory(uid)
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			break
		}
		from := mark
		var entries []koe.RecallEntry
		for _, r := range recs {
			mark.Seq = r.Seq
			if r.StartsTurn() {
				mark.Turn++
			}
			if e, ok := entryOf(r, mark.Turn); ok {
				e.HistoryUID = uid
				entries = append(entries, e)
			}
		}
		s.embedEntries(ctx, entries)
		if len(entries) > 0 && entries[0].Vector != nil {
			// Name the vectors' model before storing them: vectors of
			// another model are dropped then, not these.
			if err := s.opts.Store.SetRecallVectors(ctx, conf, s.opts.Embedder.Model(), nil); err != nil {
				return nil, err
			}
		}
		saved, err := s.opts.Store.SaveRecall(ctx, conf, uid, from, mark, entries)
		if errors.Is(err, koe.ErrNotFound) {
			c.dropHistory(uid)
			return nil, nil
		}
		if errors.Is(err, koe.ErrMarkMoved) {
			// Another instance indexed these records first: take what
			// it stored and go on from where it left off.
			s.log.Debug("recall: another instance indexed the history first; going on from its mark", "conf_uid", conf, "history_uid", uid)
			if mark, _, err = s.opts.Store.RecallMark(ctx, conf, uid); err != nil {
				return nil, err
			}
			if gone, err := takeStored(); gone || err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		c.add(saved)
		stored = stored || len(saved) > 0
		if len(recs) < readBatch {
			break
		}
	}
	sums, err := s.opts.Store.Summaries(ctx, conf, uid)
	if err != nil && !errors.Is(err, koe.ErrNotFound) {
		return nil, err
	}
	if c.setSummaries(uid, sums) || stored {
		s.tell(newsSaved, conf, uid)
	}
	return c, nil
}

// entryOf is what recall keeps of a record: the human's and the AI's
// words, nothing of tool steps, metadata or instructions.
func entryOf(r koe.Record, turn int) (koe.RecallEntry, bool) {
	if r.Role != koe.RoleHuman && r.Role != koe.RoleAI {
		return koe.RecallEntry{}, false
	}
	if strings.TrimSpace(r.Content) == "" {
		return koe.RecallEntry{}, false
	}
	return koe.RecallEntry{
		Seq: r.Seq, Turn: turn, Role: r.Role, Name: r.Name,
		Timestamp: r.Timestamp, Text: r.Content, Meta: r.Meta,
	}, true
}

// embedEntries gives entries their vectors when an endpoint is configured
// and answers; otherwise they stay keyword-only until a later backfill.
func (s *Service) embedEntries(ctx context.Context, entries []koe.RecallEntry) {
	if s.opts.Embedder == nil || len(entries) == 0 {
		return
	}
	texts := make([]string, len(entries))
	for i, e := range entries {
		texts[i] = e.Text
	}
	vecs, err := s.opts.Embedder.Embed(ctx, texts)
	if !s.embedOutcome(err) || len(vecs) != len(entries) {
		return
	}
	for i := range entries {
		entries[i].Vector = vecs[i]
	}
}

// embedOutcome logs an embedding failure once per streak of failures and
// reports whether the call worked.
func (s *Service) embedOutcome(err error) bool {
	s.mu.Lock()
	was := s.embedFailing
	s.embedFailing = err != nil && s.ctx.Err() == nil
	s.mu.Unlock()
	switch {
	case err == nil:
		if was {
			s.log.Info("recall: the embeddings endpoint answers again; vectors are being made for what was missed")
		}
		return true
	case !was && s.ctx.Err() == nil:
		s.log.Warn("recall: the embeddings endpoint failed; memories rank by keywords until it answers", "err", err)
	}
	return false
}

// backfill makes vectors for up to backfillBatch entries that lack one,
// and notes the history again if more remain.
func (s *Service) backfill(ctx context.Context, conf, uid string, c *character) error {
	if s.opts.Embedder == nil {
		return nil
	}
	s.mu.Lock()
	failing := s.embedFailing
	s.mu.Unlock()
	if failing {
		// New messages retry the endpoint; old ones wait until it works.
		return nil
	}
	todo := c.withoutVectors(backfillBatch)
	if len(todo) == 0 {
		return nil
	}
	more := len(todo) == backfillBatch
	// Another instance may have made them already.
	n, err := s.opts.Store.FillRecallVectors(ctx, conf, s.opts.Embedder.Model(), todo)
	if err != nil {
		return fmt.Errorf("read stored vectors: %w", err)
	}
	if n > 0 {
		c.setVectors(todo)
		todo = slices.DeleteFunc(todo, func(e koe.RecallEntry) bool { return e.Vector != nil })
		if len(todo) == 0 {
			if more {
				s.Noted(conf, uid)
			}
			return nil
		}
	}
	s.embedEntries(ctx, todo)
	if todo[0].Vector == nil {
		return nil
	}
	if err := s.opts.Store.SetRecallVectors(ctx, conf, s.opts.Embedder.Model(), todo); err != nil {
		return fmt.Errorf("store vectors: %w", err)
	}
	c.setVectors(todo)
	if more {
		s.Noted(conf, uid)
	}
	return nil
}
