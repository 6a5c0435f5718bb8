package historytest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"koe"
	"koe/history"
)

// recallKeys lists "uid/seq" of the entries, in the order read.
func recallKeys(es []koe.RecallEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s/%d", e.HistoryUID, e.Seq)
	}
	return out
}

func testRecallRoundTrip(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	MustCreateWith(t, s, "c", "h1")
	MustCreateWith(t, s, "c", "h10")

	if _, ok, err := s.RecallMark(ctx, "c", "h1"); err != nil || ok {
		t.Fatalf("RecallMark before any save = ok %v, err %v; want not found", ok, err)
	}
	if got := RecallOf(t, s, "c"); len(got) != 0 {
		t.Fatalf("entries before any save: %v", recallKeys(got))
	}

	a := koe.RecallEntry{HistoryUID: "h1", Seq: 256, Turn: 7, Role: koe.RoleAI, Name: "Mika", Timestamp: "2025-03-04T06:00:00",
		Text: "a long answer", Meta: map[string]string{"dia_id": "D1:3"}, Vector: []float32{0.6, -0.8}}
	b := koe.RecallEntry{HistoryUID: "h1", Seq: 3, Turn: 2, Role: koe.RoleHuman, Timestamp: "2025-03-04T05:59:00", Text: "a question"}
	c := koe.RecallEntry{HistoryUID: "h10", Seq: 2, Turn: 1, Role: koe.RoleHuman, Name: "Ann", Timestamp: "2025-03-05T05:59:00",
		Text: "another history", Vector: []float32{1}}
	// Saved out of order, across calls: reads come in history, then
	// sequence order (256 after 3: keys must sort as numbers).
	MustSaveRecall(t, s, "c", "h10", koe.RecallMark{Seq: 2, Turn: 1}, c)
	if saved := MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 256, Turn: 7}, a, b); !reflect.DeepEqual(saved, []koe.RecallEntry{a, b}) {
		t.Fatalf("saved = %+v, want both entries", saved)
	}

	got := RecallOf(t, s, "c")
	want := []koe.RecallEntry{b, a, c}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ForEachRecall:\n got %+v\nwant %+v", got, want)
	}
	if got[0].Vector != nil {
		t.Fatalf("an entry saved without a vector reads back with %v", got[0].Vector)
	}

	if m, ok, err := s.RecallMark(ctx, "c", "h1"); err != nil || !ok || m != (koe.RecallMark{Seq: 256, Turn: 7}) {
		t.Fatalf("RecallMark(h1) = %+v, %v, %v", m, ok, err)
	}
	marks, err := s.RecallMarks(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]koe.RecallMark{"h1": {Seq: 256, Turn: 7}, "h10": {Seq: 2, Turn: 1}}; !reflect.DeepEqual(marks, want) {
		t.Fatalf("RecallMarks = %v, want %v", marks, want)
	}
	// A mark only moves with a save, even one without entries.
	MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 300, Turn: 9})
	if m, _, _ := s.RecallMark(ctx, "c", "h1"); m != (koe.RecallMark{Seq: 300, Turn: 9}) {
		t.Fatalf("mark after an empty save = %+v", m)
	}
	if got := RecallOf(t, s, "c"); len(got) != 3 {
		t.Fatalf("an empty save changed the entries: %v", recallKeys(got))
	}

	// Another conf shares nothing.
	if got := RecallOf(t, s, "other"); len(got) != 0 {
		t.Fatalf("conf other sees %v", recallKeys(got))
	}
	if marks, err := s.RecallMarks(ctx, "other"); err != nil || len(marks) != 0 {
		t.Fatalf("RecallMarks(other) = %v, %v", marks, err)
	}
}

func testSaveRecallMissingHistory(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	MustCreateWith(t, s, "c", "h1")
	MustCreateWith(t, s, "c", "gone")
	if err := s.Delete(ctx, "c", "gone"); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"gone", "never"} {
		saved, err := s.SaveRecall(ctx, "c", uid, koe.RecallMark{}, koe.RecallMark{Seq: 5, Turn: 2}, []koe.RecallEntry{Entry(uid, 2, "hello")})
		if !errors.Is(err, koe.ErrNotFound) || saved != nil {
			t.Fatalf("SaveRecall(%s) = %v, %v; want ErrNotFound and nothing", uid, saved, err)
		}
		if _, ok, _ := s.RecallMark(ctx, "c", uid); ok {
			t.Fatalf("SaveRecall(%s) moved a mark", uid)
		}
	}
	// The conf has no history at all: still nothing.
	if _, err := s.SaveRecall(ctx, "nobody", "h1", koe.RecallMark{}, koe.RecallMark{Seq: 1}, []koe.RecallEntry{Entry("h1", 1, "x")}); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("SaveRecall in an unknown conf: %v", err)
	}
	if got := RecallOf(t, s, "c"); len(got) != 0 {
		t.Fatalf("entries written for missing histories: %v", recallKeys(got))
	}
	if n := be.RecallRows(t, s, "c", "entries", "gone") + be.RecallRows(t, s, "c", "entries", "never"); n != 0 {
		t.Fatalf("%d raw entries for missing histories", n)
	}
	if _, err := s.SaveRecall(ctx, "c", "../h1", koe.RecallMark{}, koe.RecallMark{}, nil); !errors.Is(err, koe.ErrInvalidID) {
		t.Fatalf("SaveRecall with a bad uid: %v", err)
	}
}

func testForgetRecallTombstone(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	MustCreateWith(t, s, "c", "h1")
	e2, e3 := Entry("h1", 2, "two"), Entry("h1", 3, "three")
	e2.Vector = []float32{1, 0}
	if err := s.SetRecallVectors(ctx, "c", "m", nil); err != nil {
		t.Fatal(err)
	}
	MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 3, Turn: 3}, e2, e3)

	existed, err := s.ForgetRecall(ctx, "c", "h1", 2)
	if err != nil || !existed {
		t.Fatalf("ForgetRecall(2) = %v, %v; want true", existed, err)
	}
	if got := recallKeys(RecallOf(t, s, "c")); !slices.Equal(got, []string{"h1/3"}) {
		t.Fatalf("after forgetting 2: %v", got)
	}
	if n := be.RecallRows(t, s, "c", "vectors", "h1"); n != 0 {
		t.Fatalf("the forgotten entry's vector is left: %d vectors", n)
	}
	// Forgetting what was never indexed (yet) is no error, and it stays
	// out when the indexer gets to it.
	if existed, err := s.ForgetRecall(ctx, "c", "h1", 4); err != nil || existed {
		t.Fatalf("ForgetRecall(4) = %v, %v; want false", existed, err)
	}

	saved := MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 5, Turn: 5}, e2, e3, Entry("h1", 4, "four"), Entry("h1", 5, "five"))
	if got := recallKeys(saved); !slices.Equal(got, []string{"h1/3", "h1/5"}) {
		t.Fatalf("saved = %v, want the entries not forgotten", got)
	}
	if got := recallKeys(RecallOf(t, s, "c")); !slices.Equal(got, []string{"h1/3", "h1/5"}) {
		t.Fatalf("stored = %v", got)
	}
	if n := be.RecallRows(t, s, "c", "vectors", "h1"); n != 0 {
		t.Fatalf("a forgotten entry's vector was stored again: %d vectors", n)
	}

	// A rebuild starts from nothing but what was forgotten.
	if err := s.ClearRecall(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if got := RecallOf(t, s, "c"); len(got) != 0 {
		t.Fatalf("entries after ClearRecall: %v", recallKeys(got))
	}
	if marks, _ := s.RecallMarks(ctx, "c"); len(marks) != 0 {
		t.Fatalf("marks after ClearRecall: %v", marks)
	}
	if m, _ := s.RecallVectorModel(ctx, "c"); m != "" {
		t.Fatalf("vector model after ClearRecall = %q", m)
	}
	saved = MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 5, Turn: 5}, e2, e3, Entry("h1", 4, "four"), Entry("h1", 5, "five"))
	if got := recallKeys(saved); !slices.Equal(got, []string{"h1/3", "h1/5"}) {
		t.Fatalf("saved after ClearRecall = %v: a tombstone did not survive", got)
	}
}

func testForgetRecallMissingHistoryLeavesNoTombstone(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	if existed, err := s.ForgetRecall(ctx, "c", "h1", 2); err != nil || existed {
		t.Fatalf("ForgetRecall on a missing history = %v, %v", existed, err)
	}
	if n := be.RecallRows(t, s, "c", "forgotten", "h1"); n != 0 {
		t.Fatalf("a tombstone for a history that does not exist")
	}
	MustCreateWith(t, s, "c", "h1")
	if got := MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 2}, Entry("h1", 2, "x")); len(got) != 1 {
		t.Fatalf("saved = %v", recallKeys(got))
	}
}

// Deletes h1 beside h10 and h2: every key of h1 is
// "h1\x00"+seq, which a plain "h1" prefix would confuse with h10's.
func testDeleteDropsRecall(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	uids := []string{"h1", "h10", "h2"}
	if err := s.SetRecallVectors(ctx, "c", "m", nil); err != nil {
		t.Fatal(err)
	}
	for _, uid := range uids {
		MustCreateWith(t, s, "c", uid)
		var es []koe.RecallEntry
		for seq := uint64(2); seq <= 4; seq++ {
			e := Entry(uid, seq, uid+" says "+fmt.Sprint(seq))
			e.Vector = []float32{float32(seq)}
			es = append(es, e)
		}
		MustSaveRecall(t, s, "c", uid, koe.RecallMark{Seq: 4, Turn: 4}, es...)
		if _, err := s.ForgetRecall(ctx, "c", uid, 3); err != nil {
			t.Fatal(err)
		}
	}
	// The same uid in another conf is another history.
	MustCreateWith(t, s, "d", "h1")
	MustSaveRecall(t, s, "d", "h1", koe.RecallMark{Seq: 2, Turn: 2}, Entry("h1", 2, "elsewhere"))

	if err := s.Delete(ctx, "c", "h1"); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"entries", "vectors", "forgotten", "marks"} {
		if n := be.RecallRows(t, s, "c", what, "h1"); n != 0 {
			t.Errorf("%d %s of h1 left", n, what)
		}
	}
	for _, uid := range []string{"h10", "h2"} {
		for what, want := range map[string]int{"entries": 2, "vectors": 2, "forgotten": 1, "marks": 1} {
			if n := be.RecallRows(t, s, "c", what, uid); n != want {
				t.Errorf("%s: %d %s, want %d", uid, n, what, want)
			}
		}
	}
	if got := recallKeys(RecallOf(t, s, "c")); !slices.Equal(got, []string{"h10/2", "h10/4", "h2/2", "h2/4"}) {
		t.Fatalf("entries after deleting h1: %v", got)
	}
	if got := recallKeys(RecallOf(t, s, "d")); !slices.Equal(got, []string{"h1/2"}) {
		t.Fatalf("conf d lost its h1: %v", got)
	}
	marks, _ := s.RecallMarks(ctx, "c")
	if _, ok := marks["h1"]; ok || len(marks) != 2 {
		t.Fatalf("marks after deleting h1: %v", marks)
	}
	// h10 keeps its tombstone.
	if got := MustSaveRecall(t, s, "c", "h10", koe.RecallMark{Seq: 4, Turn: 4}, Entry("h10", 3, "again")); len(got) != 0 {
		t.Fatalf("h10's forgotten entry was saved again: %v", recallKeys(got))
	}
	// Deleting a history that has no recall data is fine too.
	MustCreateWith(t, s, "c", "h3")
	if err := s.Delete(ctx, "c", "h3"); err != nil {
		t.Fatal(err)
	}
}

func testSetRecallVectorsModel(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	MustCreateWith(t, s, "c", "h1")
	if m, err := s.RecallVectorModel(ctx, "c"); err != nil || m != "" {
		t.Fatalf("RecallVectorModel of a new conf = %q, %v", m, err)
	}
	if err := s.SetRecallVectors(ctx, "c", "small", nil); err != nil {
		t.Fatal(err)
	}
	var es []koe.RecallEntry
	for seq := uint64(2); seq <= 4; seq++ {
		e := Entry("h1", seq, "x")
		e.Vector = []float32{float32(seq), 0.5}
		es = append(es, e)
	}
	MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 4}, es...)
	if m, _ := s.RecallVectorModel(ctx, "c"); m != "small" {
		t.Fatalf("model = %q", m)
	}

	// The same model adds to what is there.
	if err := s.SetRecallVectors(ctx, "c", "small", []koe.RecallEntry{{HistoryUID: "h1", Seq: 2, Vector: []float32{9}}}); err != nil {
		t.Fatal(err)
	}
	got := RecallOf(t, s, "c")
	if !reflect.DeepEqual(got[0].Vector, []float32{9}) || !reflect.DeepEqual(got[1].Vector, []float32{3, 0.5}) {
		t.Fatalf("vectors after a same-model update: %v, %v", got[0].Vector, got[1].Vector)
	}

	// Another model: the old vectors cannot be compared with its, so they go.
	if _, err := s.ForgetRecall(ctx, "c", "h1", 4); err != nil {
		t.Fatal(err)
	}
	err := s.SetRecallVectors(ctx, "c", "large", []koe.RecallEntry{
		{HistoryUID: "h1", Seq: 3, Vector: []float32{-1, 2, 3}},
		{HistoryUID: "h1", Seq: 4, Vector: []float32{7}},  // forgotten: skipped
		{HistoryUID: "h1", Seq: 99, Vector: []float32{7}}, // never saved: skipped
		{HistoryUID: "h1", Seq: 2},                        // no vector: skipped
	})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := s.RecallVectorModel(ctx, "c"); m != "large" {
		t.Fatalf("model = %q, want large", m)
	}
	got = RecallOf(t, s, "c")
	if len(got) != 2 || got[0].Vector != nil || !reflect.DeepEqual(got[1].Vector, []float32{-1, 2, 3}) {
		t.Fatalf("after the model changed: %+v", got)
	}
	if n := be.RecallRows(t, s, "c", "vectors", "h1"); n != 1 {
		t.Fatalf("%d vectors stored, want only the new model's one", n)
	}
}

func testSince(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	MustCreateWith(t, s, "c", "h1",
		koe.Record{Role: koe.RoleHuman, Content: "one", Meta: map[string]string{"dia_id": "D1:1"}},
		koe.Record{Role: koe.RoleAI, Content: "two"})
	MustAppend(t, s, "c", "h1", koe.Record{Role: koe.RoleHuman, Content: "three"})
	MustAppend(t, s, "c", "h1", koe.Record{Role: koe.RoleAI, Content: "four"})

	all, err := s.Since(ctx, "c", "h1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range all {
		got = append(got, fmt.Sprintf("%d:%s:%s", r.Seq, r.Role, r.Content))
	}
	if want := []string{"1:metadata:", "2:human:one", "3:ai:two", "4:human:three", "5:ai:four"}; !slices.Equal(got, want) {
		t.Fatalf("Since(0) = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(all[1].Meta, map[string]string{"dia_id": "D1:1"}) {
		t.Fatalf("Since lost the metadata: %v", all[1].Meta)
	}

	page, err := s.Since(ctx, "c", "h1", 2, 2)
	if err != nil || len(page) != 2 || page[0].Seq != 3 || page[1].Seq != 4 {
		t.Fatalf("Since(2, limit 2) = %+v, %v", page, err)
	}
	if rest, err := s.Since(ctx, "c", "h1", 5, 10); err != nil || len(rest) != 0 {
		t.Fatalf("Since past the end = %+v, %v", rest, err)
	}
	if _, err := s.Since(ctx, "c", "h1", 0, 0); !errors.Is(err, koe.ErrInvalidPage) {
		t.Fatalf("Since with limit 0: %v", err)
	}
	if _, err := s.Since(ctx, "c", "nope", 0, 1); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("Since of a missing history: %v", err)
	}
}

func testRecordMetaRoundTrip(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	meta := map[string]string{"dia_id": "D3:14", "source": "locomo"}
	MustCreateWith(t, s, "c", "h1", koe.Record{Role: koe.RoleHuman, Content: "created", Meta: meta})
	MustAppend(t, s, "c", "h1", koe.Record{Role: koe.RoleAI, Content: "appended", Meta: map[string]string{"k": "v"}})
	MustAppend(t, s, "c", "h1", koe.Record{Role: koe.RoleAI, Content: "plain"})
	msgs, err := s.Messages(ctx, "c", "h1")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || !reflect.DeepEqual(msgs[1].Meta, meta) || !reflect.DeepEqual(msgs[2].Meta, map[string]string{"k": "v"}) || msgs[3].Meta != nil {
		t.Fatalf("metadata read back: %+v", msgs)
	}
	// Stored as "metadata", beside OLV's fields.
	raw := rawRecord(t, be, s, "c", "h1", 2)
	if !bytes.Contains(raw, []byte(`"metadata":{"dia_id":"D3:14","source":"locomo"}`)) {
		t.Fatalf("stored record: %s", raw)
	}
	if raw := rawRecord(t, be, s, "c", "h1", 4); bytes.Contains(raw, []byte("metadata")) {
		t.Fatalf("a record without metadata stores %s", raw)
	}
}

func testConfs(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	if confs, err := s.Confs(ctx); err != nil || len(confs) != 0 {
		t.Fatalf("Confs of an empty store = %v, %v", confs, err)
	}
	MustCreateWith(t, s, "b", "h1")
	MustCreateWith(t, s, "a", "h1")
	MustCreateWith(t, s, "a", "h2")
	if confs, err := s.Confs(ctx); err != nil || !slices.Equal(confs, []string{"a", "b"}) {
		t.Fatalf("Confs = %v, %v", confs, err)
	}
}

func recallSeqs(t *testing.T, s history.Store, conf string) []uint64 {
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

// Many entries forgotten in one call stay forgotten
// when saved again and through a cleared index, entries not yet saved
// included; other histories keep theirs.
func testForgetRecalls(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	const conf = "koe_default"
	uid, other := MustCreate(t, s, conf), MustCreate(t, s, conf)
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
