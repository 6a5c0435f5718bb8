package knowledge_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"koe"
	"koe/knowledge"
)

// The knowledge API checks each request as a client's and tells the
// character's sessions how an added document's indexing goes.
func TestDocumentsAPI(t *testing.T) {
	s := newService(t, t.TempDir(), knowledge.NewMemoryIndex(), nil)
	var mu sync.Mutex
	var notices []knowledge.Notice
	docs := knowledge.NewDocuments(s, knowledge.DocumentsOptions{
		Count: func(c string) (func(string) int, bool) { return count, c == conf },
		Notify: func(c string, n knowledge.Notice) {
			if c != conf {
				t.Errorf("a notice for %q", c)
			}
			mu.Lock()
			notices = append(notices, n)
			mu.Unlock()
		},
	})
	kind := func(err error) koe.Kind {
		var e *koe.Error
		if !errors.As(err, &e) {
			return -1
		}
		return e.Kind
	}
	ctx := testCtx(t)

	if list, err := docs.List(ctx, conf); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("an empty base lists %v, %v; want an empty list", list, err)
	}
	d, err := docs.Add(ctx, conf, knowledge.Upload{Name: "rules.md", Mime: "text/markdown", Data: []byte("# Rules\n\nBe kind to everyone.\n")})
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, n := range notices {
		if n.Task != notices[0].Task || n.File != "rules.md" {
			t.Errorf("notice %+v is not of the one task and file", n)
		}
		stages = append(stages, n.Stage)
	}
	if len(stages) < 2 || stages[0] != "reading" || stages[len(stages)-1] != "done" {
		t.Errorf("stages told: %v, want reading first and done last", stages)
	}

	notices = nil
	_, err = docs.Add(ctx, conf, knowledge.Upload{Name: "tool.exe", Data: []byte("MZ\x90\x00\x03")})
	var fe *knowledge.FileError
	if !errors.As(err, &fe) {
		t.Fatalf("a program was taken: %v", err)
	}
	if len(notices) == 0 || notices[len(notices)-1].Stage != knowledge.StageFailed || notices[len(notices)-1].Reason != fe.Reason {
		t.Errorf("the refusal was told as %+v", notices)
	}
	if notices[0].Task == "" || slices.ContainsFunc(notices, func(n knowledge.Notice) bool { return n.Task != notices[0].Task }) {
		t.Errorf("a refused file's notices are not one task: %+v", notices)
	}

	if _, err := docs.List(ctx, "nobody"); kind(err) != koe.NotFound || !strings.Contains(err.Error(), `no character has conf_uid "nobody"`) {
		t.Errorf("an unknown character: %v", err)
	}
	if _, err := docs.Add(ctx, "../x", knowledge.Upload{Name: "a.md", Data: []byte("a")}); !errors.Is(err, koe.ErrInvalidID) {
		t.Errorf("a bad conf_uid: %v", err)
	}
	if err := docs.Delete(ctx, conf, "../x"); !errors.Is(err, koe.ErrInvalidID) {
		t.Errorf("a bad document id: %v", err)
	}
	if err := docs.Delete(ctx, conf, "nope"); kind(err) != koe.NotFound {
		t.Errorf("an unknown document: %v", err)
	}
	if err := docs.Delete(ctx, conf, d.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := docs.List(ctx, conf); len(list) != 0 {
		t.Errorf("after delete: %v", list)
	}
}
