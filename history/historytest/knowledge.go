package historytest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"koe"
)

func testKnowledgeDocRoundTrip(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	docs, err := s.KnowledgeDocs(ctx, "c")
	if err != nil || docs == nil || len(docs) != 0 {
		t.Fatalf("KnowledgeDocs of a conf without any = %#v, %v; want empty, no error", docs, err)
	}
	// Added out of id order, to see that the listing sorts by time.
	b := KnowledgeDoc("b", T0)
	a := KnowledgeDoc("a", T0.Add(time.Hour))
	text := "page one\fpage two"
	if err := s.PutKnowledgeDoc(ctx, "c", a, "alpha", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PutKnowledgeDoc(ctx, "c", b, text, []int{0, 9}); err != nil {
		t.Fatal(err)
	}
	docs, err = s.KnowledgeDocs(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0].ID != "b" || docs[1].ID != "a" {
		t.Fatalf("KnowledgeDocs = %+v, want b then a (oldest first)", docs)
	}
	if !docs[0].Added.Equal(b.Added) || docs[0].Title != b.Title || docs[0].Pages != 2 || docs[0].Bytes != 1234 {
		t.Fatalf("doc b came back as %+v, want %+v", docs[0], b)
	}
	got, pages, err := s.KnowledgeText(ctx, "c", "b")
	if err != nil || got != text || !reflect.DeepEqual(pages, []int{0, 9}) {
		t.Fatalf("KnowledgeText(b) = %q, %v, %v", got, pages, err)
	}
	got, pages, err = s.KnowledgeText(ctx, "c", "a")
	if err != nil || got != "alpha" || pages != nil {
		t.Fatalf("KnowledgeText(a) = %q, %v, %v; want no pages", got, pages, err)
	}

	// Replace by id: one document, new text, no pages.
	b.Title, b.Pages = "Manual, second edition", 0
	if err := s.PutKnowledgeDoc(ctx, "c", b, "rewritten", nil); err != nil {
		t.Fatal(err)
	}
	docs, _ = s.KnowledgeDocs(ctx, "c")
	if len(docs) != 2 || docs[0].Title != "Manual, second edition" {
		t.Fatalf("after replace, KnowledgeDocs = %+v", docs)
	}
	if got, pages, _ := s.KnowledgeText(ctx, "c", "b"); got != "rewritten" || pages != nil {
		t.Fatalf("after replace, text = %q, pages %v", got, pages)
	}

	if _, _, err := s.KnowledgeText(ctx, "c", "nope"); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("KnowledgeText of an unknown doc: err = %v, want ErrNotFound", err)
	}
	if _, _, err := s.KnowledgeText(ctx, "other", "a"); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("KnowledgeText of another conf's doc: err = %v, want ErrNotFound", err)
	}
}

func testKnowledgeDocPagesChecked(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	for _, pages := range [][]int{{0, 50}, {0, 5, 3}, {-1}} {
		err := s.PutKnowledgeDoc(ctx, "c", KnowledgeDoc("d", T0), "0123456789", pages)
		if !errors.Is(err, koe.ErrInvalidRecord) {
			t.Errorf("pages %v: err = %v, want ErrInvalidRecord", pages, err)
		}
	}
	if confs, _ := s.KnowledgeConfs(ctx); len(confs) != 0 {
		t.Fatalf("refused documents left a knowledge base: %v", confs)
	}
}

func testKnowledgeChunksRoundTripAndOrder(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	// "a-b" sorts after "a" as a string, and must as keys too.
	for _, id := range []string{"a-b", "a", "B"} {
		cs := KnowledgeChunks(id, 3, 4)
		// Put out of order: the store orders by seq.
		cs[0], cs[2] = cs[2], cs[0]
		if err := s.PutKnowledgeChunks(ctx, "c", id, cs); err != nil {
			t.Fatalf("PutKnowledgeChunks(%q): %v", id, err)
		}
	}
	got := ChunksOf(t, s, "c")
	var order []string
	for _, c := range got {
		order = append(order, fmt.Sprintf("%s/%d", c.DocID, c.Seq))
	}
	want := "B/0 B/1 B/2 a/0 a/1 a/2 a-b/0 a-b/1 a-b/2"
	if strings.Join(order, " ") != want {
		t.Fatalf("chunk order = %v, want %s", order, want)
	}
	wantChunk := KnowledgeChunks("a", 3, 4)[1]
	if !reflect.DeepEqual(got[4], wantChunk) {
		t.Fatalf("chunk a/1 came back as %+v, want %+v", got[4], wantChunk)
	}
}

func testKnowledgeChunksReplace(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	if err := s.PutKnowledgeChunks(ctx, "c", "d", KnowledgeChunks("d", 5, 8)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutKnowledgeChunks(ctx, "c", "e", KnowledgeChunks("e", 2, 8)); err != nil {
		t.Fatal(err)
	}
	// Fewer chunks, no vectors: nothing of the old five may remain.
	if err := s.PutKnowledgeChunks(ctx, "c", "d", KnowledgeChunks("d", 2, 0)); err != nil {
		t.Fatal(err)
	}
	got := ChunksOf(t, s, "c")
	if len(got) != 4 {
		t.Fatalf("after replace, %d chunks, want 4: %+v", len(got), got)
	}
	for _, c := range got[:2] {
		if c.DocID != "d" || c.Vector != nil {
			t.Fatalf("replaced chunk %+v: want doc d without a vector", c)
		}
	}
	if got[2].DocID != "e" || len(got[2].Vector) != 8 {
		t.Fatalf("the other document's chunk changed: %+v", got[2])
	}
	if strings.Contains(be.Dump(t, s), "chunk 4 of d") {
		t.Fatal("replace left an old chunk behind")
	}
	// An empty list removes them.
	if err := s.DeleteKnowledgeChunks(ctx, "c", "d"); err != nil {
		t.Fatal(err)
	}
	if got := ChunksOf(t, s, "c"); len(got) != 2 || got[0].DocID != "e" {
		t.Fatalf("after DeleteKnowledgeChunks, chunks = %+v", got)
	}
}

func testKnowledgeChunksRefused(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	if err := s.PutKnowledgeChunks(ctx, "c", "d", KnowledgeChunks("d", 2, 0)); err != nil {
		t.Fatal(err)
	}
	before := be.Dump(t, s)
	repeated := KnowledgeChunks("d", 3, 0)
	repeated[2].Seq = 0
	foreign := KnowledgeChunks("d", 3, 0)
	foreign[1].DocID = "e"
	negative := KnowledgeChunks("d", 1, 0)
	negative[0].Seq = -1
	for name, cs := range map[string][]koe.KnowledgeChunk{"repeated seq": repeated, "foreign doc": foreign, "negative seq": negative} {
		if err := s.PutKnowledgeChunks(ctx, "c", "d", cs); !errors.Is(err, koe.ErrInvalidRecord) {
			t.Errorf("%s: err = %v, want ErrInvalidRecord", name, err)
		}
	}
	if be.Dump(t, s) != before {
		t.Fatal("a refused put changed the database")
	}
}

func testKnowledgeDeleteDoc(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	for _, id := range []string{"d", "e"} {
		if err := s.PutKnowledgeDoc(ctx, "c", KnowledgeDoc(id, T0), "text of "+id, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.PutKnowledgeChunks(ctx, "c", id, KnowledgeChunks(id, 3, 4)); err != nil {
			t.Fatal(err)
		}
	}
	existed, err := s.DeleteKnowledgeDoc(ctx, "c", "d")
	if err != nil || !existed {
		t.Fatalf("DeleteKnowledgeDoc(d) = %v, %v; want true", existed, err)
	}
	if _, _, err := s.KnowledgeText(ctx, "c", "d"); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("text of a deleted doc: err = %v, want ErrNotFound", err)
	}
	for _, c := range ChunksOf(t, s, "c") {
		if c.DocID == "d" {
			t.Fatalf("chunk %+v of the deleted doc remains", c)
		}
	}
	if strings.Contains(be.Dump(t, s), "text of d") {
		t.Fatal("the deleted document's text remains")
	}
	if docs, _ := s.KnowledgeDocs(ctx, "c"); len(docs) != 1 || docs[0].ID != "e" {
		t.Fatalf("after delete, docs = %+v", docs)
	}
	if existed, err := s.DeleteKnowledgeDoc(ctx, "c", "d"); err != nil || existed {
		t.Fatalf("deleting again = %v, %v; want false, no error", existed, err)
	}
	if existed, err := s.DeleteKnowledgeDoc(ctx, "nobody", "d"); err != nil || existed {
		t.Fatalf("deleting from a conf without knowledge = %v, %v; want false, no error", existed, err)
	}
	// Chunks alone (an index written before its document) count too.
	if err := s.PutKnowledgeChunks(ctx, "c", "f", KnowledgeChunks("f", 1, 0)); err != nil {
		t.Fatal(err)
	}
	if existed, err := s.DeleteKnowledgeDoc(ctx, "c", "f"); err != nil || !existed {
		t.Fatalf("deleting a doc that has only chunks = %v, %v; want true", existed, err)
	}
}

func testKnowledgeConfs(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	if confs, err := s.KnowledgeConfs(ctx); err != nil || len(confs) != 0 {
		t.Fatalf("KnowledgeConfs of a new database = %v, %v", confs, err)
	}
	if err := s.PutKnowledgeDoc(ctx, "docs-only", KnowledgeDoc("d", T0), "x", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PutKnowledgeChunks(ctx, "chunks-only", "d", KnowledgeChunks("d", 1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutKnowledgeChunks(ctx, "emptied", "d", KnowledgeChunks("d", 1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteKnowledgeChunks(ctx, "emptied", "d"); err != nil {
		t.Fatal(err)
	}
	confs, err := s.KnowledgeConfs(ctx)
	if err != nil || strings.Join(confs, ",") != "chunks-only,docs-only" {
		t.Fatalf("KnowledgeConfs = %v, %v; want chunks-only, docs-only", confs, err)
	}
	if _, err := s.DeleteKnowledgeDoc(ctx, "docs-only", "d"); err != nil {
		t.Fatal(err)
	}
	if confs, _ := s.KnowledgeConfs(ctx); strings.Join(confs, ",") != "chunks-only" {
		t.Fatalf("after deleting the last doc, KnowledgeConfs = %v", confs)
	}
	if strings.Contains(be.Dump(t, s), "docs-only") || strings.Contains(be.Dump(t, s), "emptied") {
		t.Fatal("an emptied knowledge base left its bucket")
	}
}

func testKnowledgeInvalidIDs(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	before := be.Dump(t, s)
	bad := []string{"", "../x", ".hidden", "a/b", "a\x00b", strings.Repeat("x", 200)}
	for _, id := range bad {
		checks := map[string]error{
			"PutKnowledgeDoc conf":  s.PutKnowledgeDoc(ctx, id, KnowledgeDoc("d", T0), "x", nil),
			"PutKnowledgeDoc id":    s.PutKnowledgeDoc(ctx, "c", KnowledgeDoc(id, T0), "x", nil),
			"PutKnowledgeChunks":    s.PutKnowledgeChunks(ctx, "c", id, KnowledgeChunks("", 1, 0)),
			"DeleteKnowledgeChunks": s.DeleteKnowledgeChunks(ctx, id, "d"),
			"ForEachKnowledgeChunk": s.ForEachKnowledgeChunk(ctx, id, func(koe.KnowledgeChunk) error {
				return nil
			}),
		}
		_, err := s.KnowledgeDocs(ctx, id)
		checks["KnowledgeDocs"] = err
		_, _, err = s.KnowledgeText(ctx, "c", id)
		checks["KnowledgeText"] = err
		_, err = s.DeleteKnowledgeDoc(ctx, "c", id)
		checks["DeleteKnowledgeDoc"] = err
		for name, err := range checks {
			if !errors.Is(err, koe.ErrInvalidID) {
				t.Errorf("%s(%q): err = %v, want ErrInvalidID", name, id, err)
			}
		}
	}
	if be.Dump(t, s) != before {
		t.Fatal("calls with invalid ids changed the database")
	}
}
