package bolt

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"go.etcd.io/bbolt"

	"koe"
	"koe/history/historytest"
)

// rawSummaries returns the summaries bucket of a history as "key value"
// lines, or nil if the bucket does not exist.
func rawSummaries(t *testing.T, s *Store, conf, uid string) []string {
	t.Helper()
	var out []string
	err := s.db.View(func(tx *bbolt.Tx) error {
		h := historyBucket(tx, conf, uid)
		if h == nil {
			return fmt.Errorf("history %s/%s missing", conf, uid)
		}
		b := h.Bucket(bucketSummaries)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			out = append(out, fmt.Sprintf("%x %s", k, v))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSummariesRoundTrip(t *testing.T) {
	s, _ := openTest(t, Options{Now: historytest.StepClock(historytest.T0)})
	h := historytest.MustCreate(t, s, "c") // :07

	if got := historytest.MustSummaries(t, s, "c", h); got == nil || len(got) != 0 {
		t.Fatalf("Summaries before any = %#v, want empty non-nil slice", got)
	}

	// Out of order on purpose: the listing must follow the turns, not the
	// order of writes.
	late := historytest.Summary(h, 7, 3, "seven to nine")
	late.CreatedAt = "2030-01-01T00:00:00"
	historytest.MustAddSummary(t, s, "c", h, late)                                            // keeps its CreatedAt
	historytest.MustAddSummary(t, s, "c", h, historytest.Summary(h, 1, 3, "one to three"))    // :08
	historytest.MustAddSummary(t, s, "c", h, historytest.Summary(h, 4, 3, "four to six"))     // :09
	historytest.MustAddSummary(t, s, "c", h, historytest.Summary(h, 10, 1, "single turn"))    // :10
	historytest.MustAddSummary(t, s, "c", h, historytest.Summary(h, 300, 3, "needs 2 bytes")) // :11, key beyond one byte

	got := historytest.MustSummaries(t, s, "c", h)
	want := []koe.SummaryRecord{
		historytest.Summary(h, 1, 3, "one to three"),
		historytest.Summary(h, 4, 3, "four to six"),
		late,
		historytest.Summary(h, 10, 1, "single turn"),
		historytest.Summary(h, 300, 3, "needs 2 bytes"),
	}
	want[0].CreatedAt = "2025-03-04T05:06:08"
	want[1].CreatedAt = "2025-03-04T05:06:09"
	want[3].CreatedAt = "2025-03-04T05:06:10"
	want[4].CreatedAt = "2025-03-04T05:06:11"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Summaries:\n got %+v\nwant %+v", got, want)
	}

	// Keys are the big-endian first turn; values the documented JSON.
	raw := rawSummaries(t, s, "c", h)
	if len(raw) != 5 {
		t.Fatalf("stored %d summaries, want 5: %q", len(raw), raw)
	}
	wantFirst := `0000000000000001 {"thread_id":"` + h + `","turns":[1,2,3],"turn_length":3,"original_chars":1000,"summary_chars":300,"compression_rate":0.3,"summary":"one to three","created_at":"2025-03-04T05:06:08"}`
	if raw[0] != wantFirst {
		t.Errorf("stored summary:\n got %s\nwant %s", raw[0], wantFirst)
	}
	var keys []string
	for _, r := range raw {
		keys = append(keys, r[:16])
	}
	if wantKeys := []string{"0000000000000001", "0000000000000004", "0000000000000007", "000000000000000a", "000000000000012c"}; !reflect.DeepEqual(keys, wantKeys) {
		t.Errorf("keys = %v, want %v", keys, wantKeys)
	}
}

func TestSummariesReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "koe.db")
	s, err := Open(path, Options{Now: historytest.StepClock(historytest.T0)})
	if err != nil {
		t.Fatal(err)
	}
	h := historytest.MustCreate(t, s, "c")
	historytest.MustAddSummary(t, s, "c", h, historytest.Summary(h, 4, 3, "b"))
	historytest.MustAddSummary(t, s, "c", h, historytest.Summary(h, 1, 3, "a"))
	if err := s.SetPrompt(ctx, "c", koe.PromptSystem, "be brief"); err != nil {
		t.Fatal(err)
	}
	want := historytest.MustSummaries(t, s, "c", h)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	got := historytest.MustSummaries(t, s2, "c", h)
	if !reflect.DeepEqual(got, want) || len(got) != 2 || got[0].Summary != "a" || got[1].Summary != "b" {
		t.Fatalf("after reopen got %+v, want %+v", got, want)
	}
	if text, ok, err := s2.Prompt(ctx, "c", koe.PromptSystem); err != nil || !ok || text != "be brief" {
		t.Fatalf("Prompt after reopen = %q, %v, %v", text, ok, err)
	}
}

// A database written before "prompts" existed (only "histories", with an
// unsummarised history in it) is upgraded by Open and keeps working.
func TestOpenUpgradesOldLayout(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	const uid = "2024-01-02_03-04-05_0123456789abcdef0123456789abcdef"
	err = raw.Update(func(tx *bbolt.Tx) error {
		root, err := tx.CreateBucket(bucketHistories)
		if err != nil {
			return err
		}
		conf, err := root.CreateBucket([]byte("c"))
		if err != nil {
			return err
		}
		h, err := conf.CreateBucket([]byte(uid))
		if err != nil {
			return err
		}
		msgs, err := h.CreateBucket(bucketMessages)
		if err != nil {
			return err
		}
		if err := putRawRecord(msgs, []byte(`{"role":"metadata","timestamp":"2024-01-02T03:04:05","content":""}`)); err != nil {
			return err
		}
		return putRawRecord(msgs, []byte(`{"role":"human","timestamp":"2024-01-02T03:04:06","content":"old"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open old database: %v", err)
	}
	defer s.Close()
	var hasPrompts bool
	if err := s.db.View(func(tx *bbolt.Tx) error {
		hasPrompts = tx.Bucket(bucketPrompts) != nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !hasPrompts {
		t.Fatal(`Open did not add the "prompts" bucket`)
	}
	if _, ok, err := s.Prompt(ctx, "c", koe.PromptSystem); err != nil || ok {
		t.Fatalf("Prompt on upgraded database = %v, %v; want unset", ok, err)
	}
	if err := s.SetPrompt(ctx, "c", koe.PromptSystem, "new"); err != nil {
		t.Fatalf("SetPrompt on upgraded database: %v", err)
	}
	if got := historytest.MustSummaries(t, s, "c", uid); len(got) != 0 {
		t.Fatalf("old history has summaries %+v", got)
	}
	historytest.MustAddSummary(t, s, "c", uid, historytest.Summary(uid, 1, 1, "old turn"))
	if got := historytest.MustSummaries(t, s, "c", uid); len(got) != 1 || got[0].Summary != "old turn" {
		t.Fatalf("Summaries after AddSummary on old history = %+v", got)
	}
	msgs, err := s.Messages(ctx, "c", uid)
	if err != nil || len(msgs) != 2 || msgs[1].Content != "old" {
		t.Fatalf("Messages of old history = %+v, %v", msgs, err)
	}
}
