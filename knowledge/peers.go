package knowledge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"koe"
)

// Peers carries the news that a knowledge base changed between the koe
// instances that share one store (coord: redis). Each instance keeps what
// it derives from the store: every character's document list, the text
// of a knowledge base read whole and, with the memory and local stores,
// its own copy of the chunk index. The instance that changes a document
// announces it; the others drop what they derived and read it again.
type Peers interface {
	// Announce tells the other instances that conf's document docID was
	// added, replaced or deleted ("" docID: any of conf's documents may
	// have changed).
	Announce(ctx context.Context, conf, docID string) error
	// Follow makes the Peers call changed for every change another
	// instance announces, from a goroutine of its own, until it is
	// closed; with conf "" when announcements may have been missed (a
	// lost connection, or news that came before Follow): anything may
	// have changed. changed does not block.
	Follow(changed func(conf, docID string))
}

// refreshRetry paces the attempts to read again what another instance
// changed while the store cannot be read.
const refreshRetry = 5 * time.Second

// stale is what other instances changed and this one has yet to read
// again into its index.
type stale struct {
	all bool
	// confs holds, by character, the documents to read again; the
	// document "" stands for all of them.
	confs map[string]map[string]bool
}

func (st *stale) mark(conf, docID string) {
	if st.confs == nil {
		st.confs = map[string]map[string]bool{}
	}
	if st.confs[conf] == nil {
		st.confs[conf] = map[string]bool{}
	}
	st.confs[conf][docID] = true
}

func (st *stale) empty() bool { return !st.all && len(st.confs) == 0 }

// replica is the in-process catalog of an index that keeps its own copy
// of what the store holds (the memory and local stores), or nil: the
// postgres store is shared by every instance and keeps nothing here.
func (s *Service) replica() *catalog {
	switch x := s.opts.Index.(type) {
	case *MemoryIndex:
		return x.cat
	case *LocalIndex:
		return x.cat
	}
	return nil
}

// changed is another instance's news: conf's document docID changed (""
// conf: anything may have). The cached lists go at once; the index, when
// this instance keeps its own (cat), is read again by follow. It does not
// block.
func (s *Service) changed(conf, docID string) {
	s.mu.Lock()
	switch {
	case conf == "":
		clear(s.bases)
		s.epoch++
		s.stale.all = s.cat != nil
	default:
		delete(s.bases, conf)
		s.gens[conf]++
		if s.cat != nil {
			s.stale.mark(conf, docID)
		}
	}
	s.mu.Unlock()
	s.log.Debug("knowledge: another instance changed a knowledge base", "conf_uid", conf, "doc_id", docID)
	notify(s.wake)
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// announce tells the other instances about a change made here.
func (s *Service) announce(ctx context.Context, conf, docID string) {
	if s.opts.Peers == nil {
		return
	}
	if err := s.opts.Peers.Announce(context.WithoutCancel(ctx), conf, docID); err != nil {
		s.log.Warn("knowledge: could not tell the other instances about a change; they read everything again once they are connected again",
			"conf_uid", conf, "doc_id", docID, "err", err)
	}
}

// follow reads again, into this instance's index, what other instances
// changed: once Open has caught up, then at each change, until Close.
func (s *Service) follow() {
	defer s.wg.Done()
	select {
	case <-s.ready:
	case <-s.ctx.Done():
		return
	}
	var retry <-chan time.Time
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		case <-retry:
		}
		retry = nil
		if err := s.refresh(s.ctx, s.cat); err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("knowledge: could not read again what another instance changed; retrying", "in", refreshRetry, "err", err)
			retry = time.After(refreshRetry)
		}
	}
}

// refresh reads again into cat what is stale. What it could not read
// stays stale.
func (s *Service) refresh(ctx context.Context, cat *catalog) error {
	s.mu.Lock()
	work := s.stale
	s.stale = stale{}
	s.mu.Unlock()
	if work.empty() {
		return nil
	}
	if work.all {
		confs, err := s.opts.Docs.KnowledgeConfs(ctx)
		if err != nil {
			s.mu.Lock()
			s.stale.all = true
			s.mu.Unlock()
			return fmt.Errorf("knowledge: list characters: %w", err)
		}
		for _, conf := range append(confs, cat.confs()...) {
			work.mark(conf, "")
		}
	}
	confs := make([]string, 0, len(work.confs))
	for conf := range work.confs {
		confs = append(confs, conf)
	}
	slices.Sort(confs)
	for i, conf := range confs {
		if err := s.refreshConf(ctx, cat, conf, work.confs[conf]); err != nil {
			s.mu.Lock()
			for _, left := range confs[i:] {
				for id := range work.confs[left] {
					s.stale.mark(left, id)
				}
			}
			s.mu.Unlock()
			return err
		}
	}
	return nil
}

// refreshConf makes this instance's index hold what the store holds of
// conf's documents docs (docs[""]: all of them). A document that a change
// made here is writing meanwhile is left to that change, and read again
// once it is done: the store may have changed under the read.
func (s *Service) refreshConf(ctx context.Context, cat *catalog, conf string, docs map[string]bool) error {
	start := time.Now()
	s.mu.Lock()
	writes := s.writes[conf]
	s.mu.Unlock()
	stored, err := s.readStored(ctx, cat, conf, docs)
	if err != nil {
		return err
	}
	var ids []string
	if docs[""] {
		for id := range stored {
			ids = append(ids, id)
		}
		for _, id := range cat.docs(conf) {
			if _, ok := stored[id]; !ok {
				ids = append(ids, id)
			}
		}
	} else {
		for id := range docs {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	put, later := 0, 0
	for _, id := range ids {
		key := conf + "\x00" + id
		s.mu.Lock()
		if s.busy[key] || s.writes[conf] != writes {
			s.stale.mark(conf, id)
			s.mu.Unlock()
			later++
			continue
		}
		s.applying[key] = true
		s.mu.Unlock()
		// A missing document (nil) leaves the index.
		cat.put(conf, id, stored[id])
		s.mu.Lock()
		delete(s.applying, key)
		s.mu.Unlock()
		s.applied.Broadcast()
		put++
	}
	s.log.Debug("knowledge: read again what another instance changed", "conf_uid", conf,
		"documents", put, "left_to_a_change_here", later, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// readStored reads conf's documents docs (docs[""]: all of them) as the
// store holds them, ready for the catalog: the local store's chunks as
// stored, the memory store's cut again from the documents' text. A
// document the store does not hold has no entry.
func (s *Service) readStored(ctx context.Context, cat *catalog, conf string, docs map[string]bool) (map[string][]prepared, error) {
	if local, ok := s.opts.Index.(*LocalIndex); ok {
		return local.stored(ctx, conf, docs)
	}
	list, err := s.opts.Docs.KnowledgeDocs(ctx, conf)
	if err != nil {
		return nil, fmt.Errorf("knowledge: documents of %s: %w", conf, err)
	}
	out := map[string][]prepared{}
	for _, d := range list {
		if !docs[""] && !docs[d.ID] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		text, pages, err := s.opts.Docs.KnowledgeText(ctx, conf, d.ID)
		if errors.Is(err, koe.ErrNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, fmt.Errorf("knowledge: text of %s: %w", d.Name, err)
		}
		chunks, err := s.chunks(ctx, d, Text{Body: text, Pages: pages, Format: d.Format, Title: d.Title}, s.opts.Count)
		if err != nil {
			return nil, err
		}
		ps, err := cat.prepare(d.ID, chunks)
		if err != nil {
			return nil, fmt.Errorf("knowledge: index %s: %w", d.Name, err)
		}
		out[d.ID] = ps
	}
	return out, nil
}
