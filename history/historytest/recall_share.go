package historytest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"koe"
	"koe/history"
)

// A save moves the mark only from where it is;
// from anywhere else it writes nothing and says so.
func testSaveRecallMarkMoved(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	MustCreateWith(t, s, "c", "h1")
	first := koe.RecallMark{Seq: 3, Turn: 1}
	if _, err := s.SaveRecall(ctx, "c", "h1", koe.RecallMark{}, first, []koe.RecallEntry{Entry("h1", 2, "two")}); err != nil {
		t.Fatal(err)
	}
	before := recallKeys(RecallOf(t, s, "c"))
	for _, from := range []koe.RecallMark{{}, {Seq: 3}, {Seq: 2, Turn: 1}, {Seq: 9, Turn: 4}} {
		saved, err := s.SaveRecall(ctx, "c", "h1", from, koe.RecallMark{Seq: 5, Turn: 2}, []koe.RecallEntry{Entry("h1", 4, "four")})
		if !errors.Is(err, koe.ErrMarkMoved) || saved != nil {
			t.Fatalf("SaveRecall from %+v with the mark at %+v = %v, %v; want ErrMarkMoved", from, first, saved, err)
		}
	}
	if m, _, _ := s.RecallMark(ctx, "c", "h1"); m != first {
		t.Fatalf("refused saves moved the mark to %+v", m)
	}
	if got := recallKeys(RecallOf(t, s, "c")); !slices.Equal(got, before) {
		t.Fatalf("refused saves wrote entries: %v, want %v", got, before)
	}
	if _, err := s.SaveRecall(ctx, "c", "h1", first, koe.RecallMark{Seq: 5, Turn: 2}, []koe.RecallEntry{Entry("h1", 4, "four")}); err != nil {
		t.Fatalf("a save from the stored mark: %v", err)
	}
	// A clear takes the marks away: a save from before it is refused, a
	// save from nothing goes.
	if err := s.ClearRecall(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveRecall(ctx, "c", "h1", koe.RecallMark{Seq: 5, Turn: 2}, koe.RecallMark{Seq: 6, Turn: 3}, nil); !errors.Is(err, koe.ErrMarkMoved) {
		t.Fatalf("a save from before a clear: %v, want ErrMarkMoved", err)
	}
	if _, err := s.SaveRecall(ctx, "c", "h1", koe.RecallMark{}, koe.RecallMark{Seq: 6, Turn: 3}, []koe.RecallEntry{Entry("h1", 2, "two")}); err != nil {
		t.Fatalf("a save after a clear: %v", err)
	}
}

// A history's entries past a sequence number, with
// their vectors, in order and by pages; nothing of other histories or of
// what was forgotten; a missing history is ErrNotFound.
func testRecallSince(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	for _, uid := range []string{"h1", "h10", "empty"} {
		MustCreateWith(t, s, "c", uid)
	}
	e2, e3, e256 := Entry("h1", 2, "two"), Entry("h1", 3, "three"), Entry("h1", 256, "many")
	e256.Vector = []float32{0.6, -0.8}
	e256.Meta = map[string]string{"dia_id": "D1:3"}
	MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 256, Turn: 9}, e256, e2, e3, Entry("h1", 7, "forget me"))
	MustSaveRecall(t, s, "c", "h10", koe.RecallMark{Seq: 2, Turn: 1}, Entry("h10", 2, "elsewhere"))
	if _, err := s.ForgetRecall(ctx, "c", "h1", 7); err != nil {
		t.Fatal(err)
	}
	since := func(uid string, after uint64, limit int) []koe.RecallEntry {
		t.Helper()
		got, err := s.RecallSince(ctx, "c", uid, after, limit)
		if err != nil {
			t.Fatalf("RecallSince(%s, %d, %d): %v", uid, after, limit, err)
		}
		return got
	}
	if got, want := since("h1", 0, 10), []koe.RecallEntry{e2, e3, e256}; !reflect.DeepEqual(got, want) {
		t.Fatalf("RecallSince(h1, 0):\n got %+v\nwant %+v", got, want)
	}
	if got := since("h1", 3, 10); !reflect.DeepEqual(got, []koe.RecallEntry{e256}) {
		t.Fatalf("RecallSince(h1, 3) = %+v", got)
	}
	if got := since("h1", 0, 1); !reflect.DeepEqual(got, []koe.RecallEntry{e2}) {
		t.Fatalf("RecallSince(h1, 0, limit 1) = %+v", got)
	}
	if got := since("h1", 256, 10); len(got) != 0 {
		t.Fatalf("RecallSince(h1, 256) = %+v", got)
	}
	if got := since("empty", 0, 10); len(got) != 0 {
		t.Fatalf("a history without entries: %+v", got)
	}
	if got := since("h10", 0, 10); len(got) != 1 || got[0].Text != "elsewhere" {
		t.Fatalf("RecallSince(h10) = %+v", got)
	}
	if _, err := s.RecallSince(ctx, "c", "gone", 0, 10); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("a missing history: %v, want ErrNotFound", err)
	}
	if _, err := s.RecallSince(ctx, "c", "h1", 0, 0); !errors.Is(err, koe.ErrInvalidPage) {
		t.Fatalf("limit 0: %v, want ErrInvalidPage", err)
	}
	if _, err := s.RecallSince(ctx, "c", "../h1", 0, 1); !errors.Is(err, koe.ErrInvalidID) {
		t.Fatalf("a bad uid: %v, want ErrInvalidID", err)
	}
}

// What was forgotten of one history, or of every
// history of a conf, in order.
func testForgottenRecalls(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	MustCreateWith(t, s, "c", "h1")
	MustCreateWith(t, s, "c", "h10")
	MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 3, Turn: 3}, Entry("h1", 2, "two"), Entry("h1", 3, "three"))
	if _, err := s.ForgetRecalls(ctx, "c", "h1", []uint64{300, 3, 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetRecall(ctx, "c", "h10", 5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetRecall(ctx, "d", "h1", 4); err != nil {
		t.Fatal(err) // another conf: no history h1 there, no tombstone
	}
	all := map[string][]uint64{"h1": {3, 9, 300}, "h10": {5}}
	for uid, want := range map[string]map[string][]uint64{
		"h1": {"h1": all["h1"]}, "h10": {"h10": all["h10"]}, "gone": {}, "": all,
	} {
		got, err := s.ForgottenRecalls(ctx, "c", uid)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("ForgottenRecalls(%q) = %v, %v; want %v", uid, got, err, want)
		}
	}
	if got, err := s.ForgottenRecalls(ctx, "d", ""); err != nil || len(got) != 0 {
		t.Fatalf("ForgottenRecalls of another conf = %v, %v", got, err)
	}
	if _, err := s.ForgottenRecalls(ctx, "c", "a/b"); !errors.Is(err, koe.ErrInvalidID) {
		t.Fatalf("a bad uid: %v, want ErrInvalidID", err)
	}
}

// Entries without a vector get the one stored for
// them, if stored by the model asked for.
func testFillRecallVectors(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	MustCreateWith(t, s, "c", "h1")
	if err := s.SetRecallVectors(ctx, "c", "m1", nil); err != nil {
		t.Fatal(err)
	}
	e2, e3, e4 := Entry("h1", 2, "two"), Entry("h1", 3, "three"), Entry("h1", 4, "four")
	e2.Vector, e3.Vector = []float32{1, 0}, []float32{0, 1}
	MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 4, Turn: 4}, e2, e3, e4)

	ask := func() []koe.RecallEntry {
		mine := []float32{0.5, 0.5}
		return []koe.RecallEntry{
			{HistoryUID: "h1", Seq: 2}, {HistoryUID: "h1", Seq: 3, Vector: mine},
			{HistoryUID: "h1", Seq: 4}, {HistoryUID: "h1", Seq: 5}, {HistoryUID: "h10", Seq: 2},
		}
	}
	got := ask()
	n, err := s.FillRecallVectors(ctx, "c", "m1", got)
	if err != nil || n != 1 {
		t.Fatalf("FillRecallVectors = %d, %v; want 1", n, err)
	}
	if !reflect.DeepEqual(got[0].Vector, e2.Vector) || !reflect.DeepEqual(got[1].Vector, []float32{0.5, 0.5}) || got[2].Vector != nil || got[3].Vector != nil || got[4].Vector != nil {
		t.Fatalf("filled %+v", got)
	}
	for _, model := range []string{"m2", ""} {
		got := ask()
		if n, err := s.FillRecallVectors(ctx, "c", model, got); err != nil || n != 0 || got[0].Vector != nil {
			t.Fatalf("model %q: %d, %v, %+v; want nothing", model, n, err, got[0])
		}
	}
	if n, err := s.FillRecallVectors(ctx, "nobody", "m1", ask()); err != nil || n != 0 {
		t.Fatalf("another conf: %d, %v", n, err)
	}
}

// Indexers that read one mark and save at once, each through its own
// store where the backend allows two on one database (two PostgreSQL
// pools, as two instances have), store one set of entries: one save of
// each round goes, the others are refused; the mark never goes back.
func testSaveRecallRace(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	stores := []history.Store{s, be.second(t, s, StepClock(T0))}
	MustCreateWith(t, stores[0], "c", "h1")
	const rounds, perStore = 30, 3
	winners := make([]string, 0, rounds)
	for round := 1; round <= rounds; round++ {
		var read, done sync.WaitGroup
		type outcome struct {
			who   string
			saved []koe.RecallEntry
			err   error
		}
		out := make(chan outcome, len(stores)*perStore)
		marks := make(chan koe.RecallMark, len(stores)*perStore)
		read.Add(len(stores) * perStore)
		for i, s := range stores {
			for j := range perStore {
				who := fmt.Sprintf("store %d saver %d", i, j)
				done.Add(1)
				go func() {
					defer done.Done()
					from, _, err := s.RecallMark(ctx, "c", "h1")
					read.Done()
					if err != nil {
						out <- outcome{who: who, err: err}
						return
					}
					marks <- from
					read.Wait() // every saver has read the mark: they race
					to := koe.RecallMark{Seq: from.Seq + 1, Turn: from.Turn + 1}
					saved, err := s.SaveRecall(ctx, "c", "h1", from, to, []koe.RecallEntry{Entry("h1", to.Seq, who)})
					out <- outcome{who, saved, err}
				}()
			}
		}
		done.Wait()
		close(out)
		close(marks)
		for m := range marks {
			if m.Seq != uint64(round-1) {
				t.Fatalf("round %d: a saver read the mark at %+v, want seq %d", round, m, round-1)
			}
		}
		var won []string
		for o := range out {
			switch {
			case o.err == nil:
				if len(o.saved) != 1 {
					t.Fatalf("round %d: %s saved %v", round, o.who, o.saved)
				}
				won = append(won, o.who)
			case errors.Is(o.err, koe.ErrMarkMoved):
			default:
				t.Fatalf("round %d: %s: %v", round, o.who, o.err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d saves went (%v), want exactly one", round, len(won), won)
		}
		winners = append(winners, won[0])
		if m, _, _ := stores[1].RecallMark(ctx, "c", "h1"); m != (koe.RecallMark{Seq: uint64(round), Turn: round}) {
			t.Fatalf("after round %d the mark is %+v", round, m)
		}
	}
	got := RecallOf(t, stores[1], "c")
	if len(got) != rounds {
		t.Fatalf("%d entries stored after %d rounds: %v", len(got), rounds, recallKeys(got))
	}
	for i, e := range got {
		if e.Seq != uint64(i+1) || e.Text != winners[i] {
			t.Fatalf("entry %d = seq %d %q, want seq %d by the round's winner %q", i, e.Seq, e.Text, i+1, winners[i])
		}
	}
}
