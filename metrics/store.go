package metrics

import (
	"errors"
	"time"

	"koe"
)

// HistoryStore is the history store as conversations and the histories
// service call it.
type HistoryStore interface {
	Create(confUID string) (string, error)
	CreateWith(confUID, historyUID string, records ...koe.Record) error
	Append(confUID, historyUID string, r koe.Record) error
	Messages(confUID, historyUID string) ([]koe.Record, error)
	List(confUID string) ([]koe.ListedHistory, error)
	Delete(confUID, historyUID string) error
	AddSummary(confUID, historyUID string, r koe.SummaryRecord) error
	Summaries(confUID, historyUID string) ([]koe.SummaryRecord, error)
	SetPrompt(confUID, name, text string) error
	Prompt(confUID, name string) (string, bool, error)
	Page(confUID, historyUID string, before uint64, limit int) ([]koe.Record, bool, error)
	Image(confUID, historyUID, ref string) (string, []byte, error)
	LastSeq(confUID, historyUID string) (uint64, error)
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

func (s timedStore) Create(confUID string) (string, error) {
	start := time.Now()
	uid, err := s.next.Create(confUID)
	s.done("create", start, err)
	return uid, err
}

func (s timedStore) CreateWith(confUID, historyUID string, records ...koe.Record) error {
	start := time.Now()
	err := s.next.CreateWith(confUID, historyUID, records...)
	s.done("create_with", start, err)
	return err
}

func (s timedStore) Append(confUID, historyUID string, r koe.Record) error {
	start := time.Now()
	err := s.next.Append(confUID, historyUID, r)
	s.done("append", start, err)
	return err
}

func (s timedStore) Messages(confUID, historyUID string) ([]koe.Record, error) {
	start := time.Now()
	out, err := s.next.Messages(confUID, historyUID)
	s.done("messages", start, err)
	return out, err
}

func (s timedStore) List(confUID string) ([]koe.ListedHistory, error) {
	start := time.Now()
	out, err := s.next.List(confUID)
	s.done("list", start, err)
	return out, err
}

func (s timedStore) Delete(confUID, historyUID string) error {
	start := time.Now()
	err := s.next.Delete(confUID, historyUID)
	s.done("delete", start, err)
	return err
}

func (s timedStore) AddSummary(confUID, historyUID string, r koe.SummaryRecord) error {
	start := time.Now()
	err := s.next.AddSummary(confUID, historyUID, r)
	s.done("add_summary", start, err)
	return err
}

func (s timedStore) Summaries(confUID, historyUID string) ([]koe.SummaryRecord, error) {
	start := time.Now()
	out, err := s.next.Summaries(confUID, historyUID)
	s.done("summaries", start, err)
	return out, err
}

func (s timedStore) SetPrompt(confUID, name, text string) error {
	start := time.Now()
	err := s.next.SetPrompt(confUID, name, text)
	s.done("set_prompt", start, err)
	return err
}

func (s timedStore) Prompt(confUID, name string) (string, bool, error) {
	start := time.Now()
	text, ok, err := s.next.Prompt(confUID, name)
	s.done("prompt", start, err)
	return text, ok, err
}

func (s timedStore) Page(confUID, historyUID string, before uint64, limit int) ([]koe.Record, bool, error) {
	start := time.Now()
	out, more, err := s.next.Page(confUID, historyUID, before, limit)
	s.done("page", start, err)
	return out, more, err
}

func (s timedStore) Image(confUID, historyUID, ref string) (string, []byte, error) {
	start := time.Now()
	mime, data, err := s.next.Image(confUID, historyUID, ref)
	s.done("image", start, err)
	return mime, data, err
}

func (s timedStore) LastSeq(confUID, historyUID string) (uint64, error) {
	start := time.Now()
	seq, err := s.next.LastSeq(confUID, historyUID)
	s.done("last_seq", start, err)
	return seq, err
}
