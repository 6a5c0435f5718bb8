package app

import (
	"context"
	"errors"
	"time"

	"koe"
	"koe/conversation"
	"koe/metrics"
	"koe/server"
)

// timedStore times every call conversations make to the history store
// (koe_store_operation_seconds by op) and counts the failures; "no such
// history" is an answer, not a failure.
type timedStore struct {
	next conversation.HistoryStore
	m    *metrics.Metrics
}

func (s timedStore) done(op string, start time.Time, err error) {
	s.m.StoreOp(op, time.Since(start), err != nil && !errors.Is(err, koe.ErrNotFound))
}

func (s timedStore) Create(ctx context.Context, confUID string) (string, error) {
	start := time.Now()
	uid, err := s.next.Create(ctx, confUID)
	s.done("create", start, err)
	return uid, err
}

func (s timedStore) CreateWith(ctx context.Context, confUID, historyUID string, records ...koe.Record) error {
	start := time.Now()
	err := s.next.CreateWith(ctx, confUID, historyUID, records...)
	s.done("create_with", start, err)
	return err
}

func (s timedStore) Append(ctx context.Context, confUID, historyUID string, r koe.Record) error {
	start := time.Now()
	err := s.next.Append(ctx, confUID, historyUID, r)
	s.done("append", start, err)
	return err
}

func (s timedStore) Messages(ctx context.Context, confUID, historyUID string) ([]koe.Record, error) {
	start := time.Now()
	out, err := s.next.Messages(ctx, confUID, historyUID)
	s.done("messages", start, err)
	return out, err
}

func (s timedStore) List(ctx context.Context, confUID string) ([]koe.ListedHistory, error) {
	start := time.Now()
	out, err := s.next.List(ctx, confUID)
	s.done("list", start, err)
	return out, err
}

func (s timedStore) Delete(ctx context.Context, confUID, historyUID string) error {
	start := time.Now()
	err := s.next.Delete(ctx, confUID, historyUID)
	s.done("delete", start, err)
	return err
}

func (s timedStore) AddSummary(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error {
	start := time.Now()
	err := s.next.AddSummary(ctx, confUID, historyUID, r)
	s.done("add_summary", start, err)
	return err
}

func (s timedStore) Summaries(ctx context.Context, confUID, historyUID string) ([]koe.SummaryRecord, error) {
	start := time.Now()
	out, err := s.next.Summaries(ctx, confUID, historyUID)
	s.done("summaries", start, err)
	return out, err
}

func (s timedStore) SetPrompt(ctx context.Context, confUID, name, text string) error {
	start := time.Now()
	err := s.next.SetPrompt(ctx, confUID, name, text)
	s.done("set_prompt", start, err)
	return err
}

func (s timedStore) Prompt(ctx context.Context, confUID, name string) (string, bool, error) {
	start := time.Now()
	text, ok, err := s.next.Prompt(ctx, confUID, name)
	s.done("prompt", start, err)
	return text, ok, err
}

func (s timedStore) Page(ctx context.Context, confUID, historyUID string, before uint64, limit int) ([]koe.Record, bool, error) {
	start := time.Now()
	out, more, err := s.next.Page(ctx, confUID, historyUID, before, limit)
	s.done("page", start, err)
	return out, more, err
}

func (s timedStore) Image(ctx context.Context, confUID, historyUID, ref string) (string, []byte, error) {
	start := time.Now()
	mime, data, err := s.next.Image(ctx, confUID, historyUID, ref)
	s.done("image", start, err)
	return mime, data, err
}

func (s timedStore) LastSeq(ctx context.Context, confUID, historyUID string) (uint64, error) {
	start := time.Now()
	seq, err := s.next.LastSeq(ctx, confUID, historyUID)
	s.done("last_seq", start, err)
	return seq, err
}

// pinger is a store that can say cheaply whether it answers (a
// PostgreSQL store pings its pool).
type pinger interface {
	Ping(ctx context.Context) error
}

// Names of a history that never exists: reading it is the cheapest read
// the store interface offers (one read transaction that finds nothing).
const (
	readyConf    = "koe-readyz"
	readyHistory = "koe-readyz"
)

// storeReady is /readyz's check of the history store: its Ping if it has
// one, else a read of a history that is not there (for bbolt, one read
// transaction; a closed or broken database fails it). A bbolt read once
// begun is not cancelled: past the timeout the probe answers and the
// read's goroutine ends with the read.
func storeReady(store conversation.HistoryStore) server.ReadyCheck {
	return server.ReadyCheck{Name: "store", Check: func(ctx context.Context) error {
		if p, ok := store.(pinger); ok {
			return p.Ping(ctx)
		}
		done := make(chan error, 1)
		go func() {
			_, err := store.LastSeq(ctx, readyConf, readyHistory)
			if errors.Is(err, koe.ErrNotFound) {
				err = nil
			}
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
}
