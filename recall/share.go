package recall

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"koe"
	"koe/internal/quote"
)

// Instances of koe that share a store (PostgreSQL) each keep every
// character's index in memory, and each indexes the histories its own
// sessions write to. What one instance saves or forgets it tells the
// others on a Bus; they read it from the store (entries come with their
// vectors: nothing is embedded twice) and apply it. News is only a hint
// to read the store again: lost news is made up for by reading every
// loaded character's histories again (Resync), and by the indexer, which
// takes what another instance stored before it indexes past it.

// NewsTopic is the topic of recall's news on the Bus. A news is
// "kind\nconf_uid\nhistory_uid", kind one of the news* constants.
const NewsTopic = "recall"

const (
	// newsSaved: entries or summaries of the history were stored.
	newsSaved = "saved"
	// newsForgot: memories of the history were forgotten; an empty
	// history uid means every history of the character.
	newsForgot = "forgot"
	// newsDeleted: the history was deleted, with its memories.
	newsDeleted = "deleted"
)

// newsTimeout bounds telling the other instances of a change: the bus
// publishes one short message, and fails fast when Redis is down (the
// others then read everything again once they reach it).
const newsTimeout = 5 * time.Second

// Bus carries news between the instances that share a store (package
// coord's Bus): an instance does not hear its own news, and OnResync's
// functions run when news may have been lost.
type Bus interface {
	Publish(ctx context.Context, topic, payload string) error
	Handle(topic string, fn func(payload string))
	OnResync(fn func())
}

// Share makes the service tell the other instances on bus what it stores
// and forgets, and apply what they tell it. Call it before any character
// is loaded with the bus listening, or else Resync once it listens:
// characters loaded before may have missed news.
func (s *Service) Share(bus Bus) {
	s.mu.Lock()
	s.bus = bus
	s.mu.Unlock()
	bus.Handle(NewsTopic, s.heard)
	bus.OnResync(s.Resync)
}

// Resync reads again, in the indexer's time, what every loaded character
// may have missed of the other instances' changes: their new entries and
// summaries, what they forgot, the histories they deleted.
func (s *Service) Resync() {
	s.queueSync(syncJob{what: syncSaved | syncForgot})
}

// syncJob is news to apply: what to read again of a history (uid "":
// every history of conf; conf "": every loaded character).
type syncJob struct {
	conf, uid string
	what      int
}

const (
	syncSaved  = 1 << iota // entries and summaries past what the index holds
	syncForgot             // what was forgotten
)

// heard queues news of another instance; the Bus's goroutine calls it,
// so it only checks and queues.
func (s *Service) heard(payload string) {
	kind, rest, _ := strings.Cut(payload, "\n")
	conf, uid, ok := strings.Cut(rest, "\n")
	j := syncJob{conf: conf, uid: uid}
	switch kind {
	case newsSaved, newsDeleted:
		j.what = syncSaved
	case newsForgot:
		j.what = syncForgot
	default:
		ok = false
	}
	if !ok || !koe.ValidID(conf) || (uid != "" || kind != newsForgot) && !koe.ValidID(uid) {
		s.log.Warn("recall: ignored malformed news from another instance", "news", quote.Shorten(payload, 200))
		return
	}
	s.queueSync(j)
}

func (s *Service) queueSync(j syncJob) {
	s.mu.Lock()
	if !s.syncQueued[j] {
		s.syncQueued[j] = true
		s.syncs = append(s.syncs, j)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// tell publishes news for the other instances, if the service shares.
func (s *Service) tell(kind, conf, uid string) {
	s.mu.Lock()
	bus := s.bus
	s.mu.Unlock()
	if bus == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, newsTimeout)
	defer cancel()
	if err := bus.Publish(ctx, NewsTopic, kind+"\n"+conf+"\n"+uid); err != nil {
		s.log.Warn("recall: the other instances were not told of a change; they see it when they next read that history or reconnect",
			"change", kind, "conf_uid", conf, "history_uid", uid, "err", err)
	}
}

// apply reads again what news says changed, into the loaded characters
// it concerns (one not loaded reads everything when it loads).
func (s *Service) apply(ctx context.Context, j syncJob) {
	if j.conf == "" {
		s.mu.Lock()
		confs := make([]string, 0, len(s.chars))
		for conf := range s.chars {
			confs = append(confs, conf)
		}
		s.mu.Unlock()
		var n syncCount
		for _, conf := range confs {
			n.plus(s.applyConf(ctx, syncJob{conf: conf, what: j.what}))
		}
		if ctx.Err() == nil {
			s.log.Info("recall: read again what other instances changed while news may have been lost",
				"characters", len(confs), "added", n.added, "forgotten", n.forgotten, "histories_gone", n.gone)
		}
		return
	}
	n := s.applyConf(ctx, j)
	if n != (syncCount{}) {
		s.log.Debug("recall: changes of another instance applied", "conf_uid", j.conf, "history_uid", j.uid,
			"added", n.added, "forgotten", n.forgotten, "histories_gone", n.gone)
	}
}

// syncCount is what applying news changed in an index.
type syncCount struct{ added, forgotten, gone int }

func (n *syncCount) plus(o syncCount) {
	n.added += o.added
	n.forgotten += o.forgotten
	n.gone += o.gone
}

// applyConf applies a job to one character, if loaded.
func (s *Service) applyConf(ctx context.Context, j syncJob) syncCount {
	s.mu.Lock()
	l := s.chars[j.conf]
	s.mu.Unlock()
	if l == nil {
		return syncCount{}
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return syncCount{}
	}
	if l.c == nil {
		return syncCount{}
	}
	n, err := s.syncConf(ctx, j, l.c)
	if err != nil {
		s.log.Warn("recall: could not read what another instance changed; it is read again at the next news or reconnection",
			"conf_uid", j.conf, "history_uid", j.uid, "err", err)
	}
	return n
}

// syncConf reads again what another instance may have changed of a
// character's history (every history when j.uid is ""): its entries past
// those the index holds, with its summaries, and (with syncForgot) what
// was forgotten of it. A history gone from the store is dropped from the
// index. Reading every history costs a query each (its summaries) and
// three for the character.
func (s *Service) syncConf(ctx context.Context, j syncJob, c *character) (syncCount, error) {
	var n syncCount
	var forgotten map[string][]uint64
	if j.what&syncForgot != 0 {
		var err error
		if forgotten, err = s.opts.Store.ForgottenRecalls(ctx, j.conf, j.uid); err != nil {
			return n, err
		}
	}
	uids := []string{j.uid}
	// ahead: the store may hold entries of the history past the index's.
	ahead := func(string) bool { return true }
	switch {
	case j.uid != "":
	case j.what&syncSaved == 0:
		uids = slices.Collect(maps.Keys(forgotten))
	default:
		listed, err := s.opts.Store.List(ctx, j.conf)
		if err != nil {
			return n, fmt.Errorf("list the histories of %q: %w", j.conf, err)
		}
		// Marks read now: entries stored later come with news, heard
		// from now on.
		marks, err := s.opts.Store.RecallMarks(ctx, j.conf)
		if err != nil {
			return n, err
		}
		uids = uids[:0]
		inStore := map[string]bool{}
		for _, h := range listed {
			inStore[h.UID] = true
			uids = append(uids, h.UID)
		}
		for _, uid := range c.historyUIDs() {
			if !inStore[uid] {
				uids = append(uids, uid) // deleted, or emptied: read to tell
			}
		}
		ahead = func(uid string) bool { return !inStore[uid] || marks[uid].Seq > c.lastSeq(uid) }
	}
	var vectors bool
	if j.what&syncSaved != 0 {
		var err error
		if vectors, err = s.storedVectorsUsable(ctx, j.conf); err != nil {
			return n, err
		}
	}
	for _, uid := range uids {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if j.what&syncSaved != 0 {
			if ahead(uid) {
				added, gone, err := s.takeStored(ctx, j.conf, uid, c, vectors)
				n.added += added
				if gone {
					n.gone++
					continue
				}
				if err != nil {
					return n, err
				}
			}
			sums, err := s.opts.Store.Summaries(ctx, j.conf, uid)
			if err != nil && !errors.Is(err, koe.ErrNotFound) {
				return n, fmt.Errorf("read the summaries of %q: %w", uid, err)
			}
			c.setSummaries(uid, sums)
		}
		n.forgotten += c.removeAll(uid, forgotten[uid])
	}
	return n, nil
}

// storedVectorsUsable reports whether the stored vectors of a character
// are comparable with this service's questions: made by its model.
func (s *Service) storedVectorsUsable(ctx context.Context, conf string) (bool, error) {
	if s.opts.Embedder == nil {
		return false, nil
	}
	model, err := s.opts.Store.RecallVectorModel(ctx, conf)
	if err != nil {
		return false, err
	}
	return model == s.opts.Embedder.Model(), nil
}

// takeStored adds to the index the entries of a history the store holds
// past the last the index has (another instance stored them), with their
// vectors if usable, and reports how many it added. gone: the history no
// longer exists, and is dropped from the index.
func (s *Service) takeStored(ctx context.Context, conf, uid string, c *character, useVectors bool) (added int, gone bool, err error) {
	after := c.lastSeq(uid)
	for {
		es, err := s.opts.Store.RecallSince(ctx, conf, uid, after, readBatch)
		if errors.Is(err, koe.ErrNotFound) {
			c.dropHistory(uid)
			return added, true, nil
		}
		if err != nil {
			return added, false, err
		}
		if len(es) == 0 {
			return added, false, nil
		}
		if !useVectors {
			for i := range es {
				es[i].Vector = nil
			}
		}
		added += c.add(es)
		after = es[len(es)-1].Seq
		if len(es) < readBatch {
			return added, false, nil
		}
	}
}
