package bolt

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"koe"
	"koe/history/historytest"
)

func TestRecallReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "koe.db")
	s, err := Open(path, Options{Now: historytest.StepClock(historytest.T0)})
	if err != nil {
		t.Fatal(err)
	}
	historytest.MustCreateWith(t, s, "c", "h1", koe.Record{Role: koe.RoleHuman, Content: "hi", Meta: map[string]string{"a": "b"}})
	if err := s.SetRecallVectors(ctx, "c", "m1", nil); err != nil {
		t.Fatal(err)
	}
	e := historytest.Entry("h1", 2, "hi")
	e.Meta, e.Vector = map[string]string{"a": "b"}, []float32{0.25, 0.5}
	historytest.MustSaveRecall(t, s, "c", "h1", koe.RecallMark{Seq: 2, Turn: 1}, e, historytest.Entry("h1", 3, "forget me"))
	if _, err := s.ForgetRecall(ctx, "c", "h1", 3); err != nil {
		t.Fatal(err)
	}
	want := historytest.RecallOf(t, s, "c")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	if got := historytest.RecallOf(t, s2, "c"); !reflect.DeepEqual(got, want) || len(got) != 1 || !reflect.DeepEqual(got[0].Vector, e.Vector) {
		t.Fatalf("after reopen: %+v, want %+v", got, want)
	}
	if m, ok, err := s2.RecallMark(ctx, "c", "h1"); err != nil || !ok || m != (koe.RecallMark{Seq: 2, Turn: 1}) {
		t.Fatalf("mark after reopen: %+v %v %v", m, ok, err)
	}
	if m, _ := s2.RecallVectorModel(ctx, "c"); m != "m1" {
		t.Fatalf("model after reopen = %q", m)
	}
	if saved, err := s2.SaveRecall(ctx, "c", "h1", koe.RecallMark{Seq: 2, Turn: 1}, koe.RecallMark{Seq: 3, Turn: 2}, []koe.RecallEntry{historytest.Entry("h1", 3, "forget me")}); err != nil || len(saved) != 0 {
		t.Fatalf("the tombstone did not survive the reopen: %v, %v", saved, err)
	}
	msgs, err := s2.Messages(ctx, "c", "h1")
	if err != nil || !reflect.DeepEqual(msgs[1].Meta, map[string]string{"a": "b"}) {
		t.Fatalf("record metadata after reopen: %+v, %v", msgs, err)
	}
	if confs, err := s2.Confs(ctx); err != nil || !slices.Equal(confs, []string{"c"}) {
		t.Fatalf("Confs after reopen = %v, %v", confs, err)
	}
}
