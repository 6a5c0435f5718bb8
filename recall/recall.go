// Package recall is a character's long-term memory: every human and AI
// message of every history of a character (conf uid) is indexed as it is
// stored, and before each reply the messages of other conversations (or of
// the part of this one only present as summaries) that bear on the user's
// message come back as a compact, dated "memories" block.
//
// Ranking is lexical first, so that it works with nothing but koe: BM25
// over single messages (package textindex), with each message also scored
// by its neighbours in the same session and by its session as a whole,
// and a boost for messages of a person the question names. When an
// embeddings endpoint is configured, a vector ranking is fused in by
// reciprocal rank; the summaries the agent writes are a third view, each
// pointing at the turns it covers.
//
// The index lives in memory, loaded from the history database (package
// history keeps the entries, their vectors and how far each history was
// indexed) and caught up from the histories themselves, so a missing or
// stale index is rebuilt from what was said. Instances of koe that share
// a database tell each other what they stored and forgot (share.go).
package recall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"koe"
)

// Store is the persistence recall needs; every history.Store (the bolt
// and postgres stores) implements it.
type Store interface {
	Confs(ctx context.Context) ([]string, error)
	List(ctx context.Context, confUID string) ([]koe.ListedHistory, error)
	LastSeq(ctx context.Context, confUID, historyUID string) (uint64, error)
	Since(ctx context.Context, confUID, historyUID string, after uint64, limit int) ([]koe.Record, error)
	Summaries(ctx context.Context, confUID, historyUID string) ([]koe.SummaryRecord, error)
	RecallMarks(ctx context.Context, confUID string) (map[string]koe.RecallMark, error)
	RecallMark(ctx context.Context, confUID, historyUID string) (koe.RecallMark, bool, error)
	SaveRecall(ctx context.Context, confUID, historyUID string, from, mark koe.RecallMark, entries []koe.RecallEntry) ([]koe.RecallEntry, error)
	SetRecallVectors(ctx context.Context, confUID, model string, entries []koe.RecallEntry) error
	RecallVectorModel(ctx context.Context, confUID string) (string, error)
	ForEachRecall(ctx context.Context, confUID string, fn func(koe.RecallEntry) error) error
	ForgetRecall(ctx context.Context, confUID, historyUID string, seq uint64) (bool, error)
	ForgetRecalls(ctx context.Context, confUID, historyUID string, seqs []uint64) (int, error)
	ClearRecall(ctx context.Context, confUID string) error
	// What other instances sharing the store saved and forgot (share.go).
	RecallSince(ctx context.Context, confUID, historyUID string, after uint64, limit int) ([]koe.RecallEntry, error)
	ForgottenRecalls(ctx context.Context, confUID, historyUID string) (map[string][]uint64, error)
	FillRecallVectors(ctx context.Context, confUID, model string, entries []koe.RecallEntry) (int, error)
}

// Embedder turns texts into unit vectors (package llm's Embedder).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Model() string
}

// Options build a Service.
type Options struct {
	Store Store
	// Embedder, if set, adds a vector ranking; without it recall is
	// keyword-only.
	Embedder Embedder
	// QueryTimeout bounds embedding a live turn's message (0: 500 ms);
	// past it the turn ranks by keywords alone.
	QueryTimeout time.Duration
	// Count counts tokens (the default tokenizer's); blocks are sized
	// with it.
	Count  func(string) int
	Logger *slog.Logger
	// IndexAtOnce is how many noted histories the indexer indexes at the
	// same time (0: one at a time). The bolt store commits saves made at
	// the same time together, with one disk sync (see indexNoted);
	// PostgreSQL's pool is better left to the turns.
	IndexAtOnce int
}

// Service is every character's recall index and the indexer that keeps
// them up to date. Its methods are safe for concurrent use.
type Service struct {
	opts Options
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}

	mu      sync.Mutex
	chars   map[string]*loading // by conf uid
	pending []noted             // histories to index, in the order noted
	queued  map[noted]bool
	idle    *sync.Cond // signalled when pending empties and no job runs
	working bool
	// clears are Rebuild's: the indexer runs them between its jobs, so
	// that no job reads a mark before a clear and saves after it.
	clears []clearReq
	// embedFailing: the last embedding request failed; the warning is
	// logged once per streak.
	embedFailing bool
	// bus, if set, carries news to and from the other instances that
	// share the store; syncs are the news heard, applied by the indexer
	// between its jobs (share.go).
	bus        Bus
	syncs      []syncJob
	syncQueued map[syncJob]bool
}

type noted struct{ conf, uid string }

// clearReq asks the indexer to drop a character's index; done (buffered)
// gets the outcome.
type clearReq struct {
	conf string
	done chan error
}

// loading is a character's index, ready once done is closed.
type loading struct {
	done chan struct{}
	c    *character
	err  error
}

// New starts the service's indexer; Close stops it.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = 500 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel,
		wake:   make(chan struct{}, 1),
		chars:  map[string]*loading{},
		queued: map[noted]bool{},

		syncQueued: map[syncJob]bool{},
	}
	s.idle = sync.NewCond(&s.mu)
	s.wg.Add(1)
	go s.run()
	return s
}

// Close stops the indexer and waits for it. Histories noted but not yet
// indexed are caught up at the next start.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	s.idle.Broadcast()
	s.mu.Unlock()
}

// Noted tells the indexer a history got new records (or summaries). It
// never blocks: the indexing runs off the turn's path.
func (s *Service) Noted(confUID, historyUID string) {
	n := noted{confUID, historyUID}
	s.mu.Lock()
	if !s.queued[n] {
		s.queued[n] = true
		s.pending = append(s.pending, n)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Settle waits until every history noted so far is indexed (or ctx ends).
// Tests and the evaluation use it; live turns never wait for indexing.
func (s *Service) Settle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for (len(s.pending) > 0 || len(s.clears) > 0 || len(s.syncs) > 0 || s.working) && ctx.Err() == nil && s.ctx.Err() == nil {
		s.idle.Wait()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.ctx.Err()
}

// run is the indexer: it takes noted histories one at a time, and
// between them the clears of Rebuild and the news of other instances.
// Everything that adds to a loaded index runs here, in order.
func (s *Service) run() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if len(s.clears) > 0 {
			r := s.clears[0]
			s.clears = s.clears[1:]
			s.working = true
			s.mu.Unlock()
			r.done <- s.clear(s.ctx, r.conf)
			continue
		}
		if len(s.syncs) > 0 {
			j := s.syncs[0]
			s.syncs = s.syncs[1:]
			delete(s.syncQueued, j)
			s.working = true
			s.mu.Unlock()
			s.apply(s.ctx, j)
			continue
		}
		if len(s.pending) == 0 {
			s.working = false
			s.idle.Broadcast()
			s.mu.Unlock()
			select {
			case <-s.ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		k := min(len(s.pending), max(s.opts.IndexAtOnce, 1))
		batch := slices.Clone(s.pending[:k])
		s.pending = s.pending[k:]
		for _, n := range batch {
			delete(s.queued, n)
		}
		s.working = true
		s.mu.Unlock()

		s.indexNoted(batch)
	}
}

// character returns a conf's index, loading it on first use. Concurrent
// callers share one load.
func (s *Service) character(ctx context.Context, conf string) (*character, error) {
	s.mu.Lock()
	l, ok := s.chars[conf]
	if !ok {
		l = &loading{done: make(chan struct{})}
		s.chars[conf] = l
		s.mu.Unlock()
		// The service's context, not the caller's: the load is shared by
		// every caller, and one leaving must not fail it for the others.
		l.c, l.err = s.load(s.ctx, conf)
		if l.err != nil {
			// The next caller tries again.
			s.mu.Lock()
			delete(s.chars, conf)
			s.mu.Unlock()
		}
		close(l.done)
	} else {
		s.mu.Unlock()
	}
	select {
	case <-l.done:
		return l.c, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// load reads a conf's stored entries and notes every history whose
// records are not all indexed, so the indexer catches up.
func (s *Service) load(ctx context.Context, conf string) (*character, error) {
	c := newCharacter(s.opts.Count)
	model, err := s.opts.Store.RecallVectorModel(ctx, conf)
	if err != nil {
		return nil, err
	}
	// Vectors of another model (or of none now configured) cannot be
	// compared with a question's: they are left out, and made again.
	useVectors := s.opts.Embedder != nil && model == s.opts.Embedder.Model()
	// The marks before the entries: a history another instance indexes
	// meanwhile has a mark read behind its records, and is caught up.
	marks, err := s.opts.Store.RecallMarks(ctx, conf)
	if err != nil {
		return nil, err
	}
	var entries []koe.RecallEntry
	err = s.opts.Store.ForEachRecall(ctx, conf, func(e koe.RecallEntry) error {
		if !useVectors {
			e.Vector = nil
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load recall of %q: %w", conf, err)
	}
	c.add(entries)
	if err := s.catchUp(ctx, conf, c, marks); err != nil {
		return nil, err
	}
	if s.opts.Embedder != nil && c.missing > 0 {
		// Vectors to make (a new endpoint, another model): the indexer's
		// backfill runs with any history's job; give it one now rather
		// than at the character's next message.
		for uid := range c.byHistory {
			s.Noted(conf, uid)
			break
		}
	}
	return c, nil
}

// catchUp notes the histories of conf with records past their mark, and
// indexes every history's summaries.
func (s *Service) catchUp(ctx context.Context, conf string, c *character, marks map[string]koe.RecallMark) error {
	list, err := s.opts.Store.List(ctx, conf)
	if err != nil {
		return fmt.Errorf("recall catch-up of %q: %w", conf, err)
	}
	for _, h := range list {
		last, err := s.opts.Store.LastSeq(ctx, conf, h.UID)
		if err != nil {
			if errors.Is(err, koe.ErrNotFound) {
				continue
			}
			return fmt.Errorf("recall catch-up of %q: %w", conf, err)
		}
		if marks[h.UID].Seq < last {
			s.Noted(conf, h.UID)
		}
		sums, err := s.opts.Store.Summaries(ctx, conf, h.UID)
		if err != nil && !errors.Is(err, koe.ErrNotFound) {
			return fmt.Errorf("recall catch-up of %q: %w", conf, err)
		}
		c.setSummaries(h.UID, sums)
	}
	return nil
}

// Preload loads every character that has histories, in the background of
// the caller (app starts it at boot), so that the first turn after a
// restart does not wait for its character's index.
func (s *Service) Preload(ctx context.Context) error {
	confs, err := s.opts.Store.Confs(ctx)
	if err != nil {
		return err
	}
	for _, conf := range confs {
		if _, err := s.character(ctx, conf); err != nil {
			return err
		}
	}
	return nil
}

// ForgetHistory drops a deleted history's memories from the index (the
// store dropped them with the history), and tells the other instances.
func (s *Service) ForgetHistory(confUID, historyUID string) {
	defer s.tell(newsDeleted, confUID, historyUID)
	s.mu.Lock()
	l := s.chars[confUID]
	s.mu.Unlock()
	if l == nil {
		return
	}
	<-l.done
	if l.c != nil {
		l.c.dropHistory(historyUID)
	}
}

// Forget removes one memory for good: it is never recalled or indexed
// again, even by a rebuild.
func (s *Service) Forget(ctx context.Context, confUID, historyUID string, seq uint64) (bool, error) {
	c, err := s.character(ctx, confUID)
	if err != nil {
		return false, err
	}
	ok, err := s.opts.Store.ForgetRecall(ctx, confUID, historyUID, seq)
	if err != nil {
		return false, err
	}
	c.remove(historyUID, seq)
	s.tell(newsForgot, confUID, historyUID)
	return ok, nil
}

// Rebuild drops a character's index and builds it again from its
// histories (forgotten memories stay forgotten). It returns once done.
func (s *Service) Rebuild(ctx context.Context, confUID string) error {
	done := make(chan error, 1)
	s.mu.Lock()
	s.clears = append(s.clears, clearReq{conf: confUID, done: done})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	if _, err := s.character(ctx, confUID); err != nil {
		return err
	}
	return s.Settle(ctx)
}

// clear drops a character's stored and loaded index (the indexer's part
// of Rebuild).
func (s *Service) clear(ctx context.Context, conf string) error {
	if err := s.opts.Store.ClearRecall(ctx, conf); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.chars, conf)
	s.mu.Unlock()
	return nil
}

// Stats describe a character's index.
type Stats struct {
	Memories  int `json:"memories"`
	Histories int `json:"histories"`
	// WithVectors counts the memories that have an embedding.
	WithVectors int `json:"with_vectors"`
}

// Stats reports the size of a character's index.
func (s *Service) Stats(ctx context.Context, confUID string) (Stats, error) {
	c, err := s.character(ctx, confUID)
	if err != nil {
		return Stats{}, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return Stats{Memories: c.live, Histories: len(c.byHistory), WithVectors: c.live - c.missing}, nil
}
