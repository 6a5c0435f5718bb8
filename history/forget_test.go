package history

import (
	"errors"
	"slices"
	"testing"

	"koe"
)

func recallSeqs(t *testing.T, s testStore, conf string) []uint64 {
	t.Helper()
	ctx := t.Context()
	var out []uint64
	if err := s.ForEachRecall(ctx, conf, func(e koe.RecallEntry) error {
		out = append(out, e.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestForgetRecalls: many entries forgotten in one call stay forgotten
// when saved again and through a cleared index, entries not yet saved
// included; other histories keep theirs.
func TestForgetRecalls(t *testing.T) { eachBackend(t, testForgetRecalls) }

func testForgetRecalls(t *testing.T, open opener) {
	ctx := t.Context()
	s := open(t, Options{Now: stepClock(t0)})
	const conf = "koe_default"
	uid, other := mustCreate(t, s, conf), mustCreate(t, s, conf)
	entry := func(seq uint64) koe.RecallEntry {
		return koe.RecallEntry{HistoryUID: uid, Seq: seq, Turn: 1, Role: koe.RoleHuman, Text: "bees", Vector: []float32{1, 0}}
	}
	if _, err := s.SaveRecall(ctx, conf, uid, koe.RecallMark{}, koe.RecallMark{Seq: 3, Turn: 1}, []koe.RecallEntry{entry(2), entry(3)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveRecall(ctx, conf, other, koe.RecallMark{}, koe.RecallMark{Seq: 2, Turn: 1}, []koe.RecallEntry{{HistoryUID: other, Seq: 2, Role: koe.RoleHuman, Text: "milk"}}); err != nil {
		t.Fatal(err)
	}

	// 4 is not indexed yet: it must never be.
	n, err := s.ForgetRecalls(ctx, conf, uid, []uint64{2, 3, 4})
	if err != nil || n != 2 {
		t.Fatalf("ForgetRecalls = %d, %v; want 2 entries that existed", n, err)
	}
	if got := recallSeqs(t, s, conf); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("entries left %v, want only the other history's seq 2", got)
	}
	saved, err := s.SaveRecall(ctx, conf, uid, koe.RecallMark{Seq: 3, Turn: 1}, koe.RecallMark{Seq: 4, Turn: 2}, []koe.RecallEntry{entry(2), entry(4), entry(5)})
	if err != nil {
		t.Fatal(err)
	}
	if len(saved) != 1 || saved[0].Seq != 5 {
		t.Fatalf("saved again %v, want only seq 5", saved)
	}
	if err := s.ClearRecall(ctx, conf); err != nil {
		t.Fatal(err)
	}
	saved, err = s.SaveRecall(ctx, conf, uid, koe.RecallMark{}, koe.RecallMark{Seq: 5, Turn: 2}, []koe.RecallEntry{entry(2), entry(3), entry(4), entry(5)})
	if err != nil || len(saved) != 1 || saved[0].Seq != 5 {
		t.Fatalf("after a clear, saved %v, %v; want only seq 5", saved, err)
	}

	if n, err := s.ForgetRecalls(ctx, conf, uid, []uint64{2}); err != nil || n != 0 {
		t.Errorf("forgetting again = %d, %v; want 0", n, err)
	}
	if n, err := s.ForgetRecalls(ctx, conf, "2025-01-01_00-00-00_00000000000000000000000000000000", []uint64{2}); err != nil || n != 0 {
		t.Errorf("a missing history = %d, %v; want 0, nil", n, err)
	}
	if _, err := s.ForgetRecalls(ctx, conf, "../x", []uint64{2}); !errors.Is(err, koe.ErrInvalidID) {
		t.Errorf("a bad id: %v, want ErrInvalidID", err)
	}
}
