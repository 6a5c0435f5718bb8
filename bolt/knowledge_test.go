package bolt

import (
	"path/filepath"
	"reflect"
	"testing"

	"koe/history/historytest"
)

func TestKnowledgeSurvivesHistoryDeleteAndReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "koe.db")
	s, err := Open(path, Options{Now: historytest.StepClock(historytest.T0)})
	if err != nil {
		t.Fatal(err)
	}
	h := historytest.MustCreate(t, s, "c")
	doc := historytest.KnowledgeDoc("d", historytest.T0)
	if err := s.PutKnowledgeDoc(ctx, "c", doc, "the handbook", []int{0}); err != nil {
		t.Fatal(err)
	}
	chunks := historytest.KnowledgeChunks("d", 3, 16)
	if err := s.PutKnowledgeChunks(ctx, "c", "d", chunks); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "c", h); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	docs, err := s.KnowledgeDocs(ctx, "c")
	if err != nil || len(docs) != 1 || docs[0].ID != "d" || !docs[0].Added.Equal(doc.Added) {
		t.Fatalf("after history delete and reopen, docs = %+v, %v", docs, err)
	}
	if text, pages, err := s.KnowledgeText(ctx, "c", "d"); err != nil || text != "the handbook" || !reflect.DeepEqual(pages, []int{0}) {
		t.Fatalf("after reopen, text = %q, %v, %v", text, pages, err)
	}
	if got := historytest.ChunksOf(t, s, "c"); !reflect.DeepEqual(got, chunks) {
		t.Fatalf("after reopen, chunks = %+v, want %+v", got, chunks)
	}
	if confs, _ := s.KnowledgeConfs(ctx); len(confs) != 1 || confs[0] != "c" {
		t.Fatalf("after reopen, KnowledgeConfs = %v", confs)
	}
}
