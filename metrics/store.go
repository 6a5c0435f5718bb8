package metrics

import (
	"context"
	"errors"
	"time"

	"koe"
)

// HistoryStore is the history store as conversations and the histories
// service call it.
type HistoryStore interface {
	Create(ctx context.Context, confUID string) (string, error)
	CreateWith(ctx context.Context, confUID, historyUID string, records ...koe.Record) error
	Append(ctx context.Context, confUID, historyUID string, r koe.Record) error
	Messages(ctx context.Context, confUID, historyUID string) ([]koe.Record, error)
	List(ctx context.Context, confUID string) ([]koe.ListedHistory, error)
	Delete(ctx context.Context, confUID, historyUID string) error
	AddSummary(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error
	Summaries(ctx context.Context, confUID, historyUID string) ([]koe.SummaryRecord, error)
	SetPrompt(ctx context.Context, confUID, name, text string) error
	Prompt(ctx context.Context, confUID, name string) (string, bool, error)
	Page(ctx context.Context, confUID, historyUID string, before uint64, limit int) ([]koe.Record, bool, error)
	Image(ctx context.Context, confUID, historyUID, ref string) (string, []byte, error)
	LastSeq(ctx context.Context, confUID, historyUID string) (uint64, error)
}

// TimeStore returns store with every call timed
// (koe_store_operation_seconds by op) and its failures counted; "no such
// history" is an answer, not a failure.
func (m *Metrics) TimeStore(store HistoryStore) HistoryStore {
	return timedStore{next: store, m: m}
}

type timedStore struct {
	next HistoryStore
	m    *Metrics
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
