package recall

import "sync"

// IndexAtOnce is the Options.IndexAtOnce for the bolt store. When many
// turns end together (a thousand sessions, say), each history's save is
// a transaction of its own: one after another, a thousand turns cost a
// thousand disk syncs, more than storing the turns themselves. Saved at
// the same time, the bolt store commits them together, a sync for many.
const IndexAtOnce = 32

// indexNoted indexes a batch of distinct noted histories: their records
// at the same time, then their older entries' vectors one history after
// another (a backfill picks any entries of the character that lack a
// vector, so two at once would embed the same ones twice).
func (s *Service) indexNoted(batch []noted) {
	if len(batch) == 1 {
		n := batch[0]
		s.logIndexErr(n, s.indexHistory(s.ctx, n.conf, n.uid))
		return
	}
	chars := make([]*character, len(batch))
	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	for i, n := range batch {
		wg.Go(func() { chars[i], errs[i] = s.indexRecords(s.ctx, n.conf, n.uid) })
	}
	wg.Wait()
	for i, n := range batch {
		err := errs[i]
		if err == nil && chars[i] != nil {
			err = s.backfill(s.ctx, n.conf, n.uid, chars[i])
		}
		s.logIndexErr(n, err)
	}
}

func (s *Service) logIndexErr(n noted, err error) {
	if err != nil && s.ctx.Err() == nil {
		s.log.Warn("recall: could not index a history; it is retried at its next message", "conf_uid", n.conf, "history_uid", n.uid, "err", err)
	}
}
