package live

import (
	"context"
	"testing"

	"koe/recall"
)

func TestMentions(t *testing.T) {
	for _, c := range []struct {
		line, viewer string
		want         bool
	}{
		{"viewer Alice says: hi", "alice", true},
		{"ALICE!", "Alice", true},
		{"Alicein says hi", "Alice", false},
		{"Malice says hi", "Alice", false},
		{"malice, then Alice", "Alice", true},
		{"bob_2 says hi", "bob", false},
		{"Zoë says hi", "zoë", true},
		{"anything", "", false},
	} {
		if got := mentions(c.line, c.viewer); got != c.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", c.line, c.viewer, got, c.want)
		}
	}
}

type fakeRecall struct {
	q     recall.Query
	block recall.Block
}

func (f *fakeRecall) Recall(_ context.Context, q recall.Query) (recall.Block, error) {
	f.q = q
	return f.block, nil
}

// A viewer's notes are the lines of recalled chat that name them, asked
// of the character's memory by their name within its recall budget.
func TestViewerNotes(t *testing.T) {
	r := &fakeRecall{block: recall.Block{Memories: []recall.Memory{
		{Text: "viewer Alice says: \"my cat is Tom\"\nviewer Bob says: \"hi\""},
		{Text: "  viewer alice says: \"I am back\"  "},
	}}}
	notes := viewerNotes{recall: r, conf: "mao", budget: 300}
	got, err := notes.About(context.Background(), "Alice")
	if err != nil {
		t.Fatal(err)
	}
	if want := `viewer Alice says: "my cat is Tom" / viewer alice says: "I am back"`; got != want {
		t.Errorf("notes = %q, want %q", got, want)
	}
	if r.q.ConfUID != "mao" || r.q.Text != "Alice" || r.q.Budget != 300 {
		t.Errorf("recall asked %+v", r.q)
	}
}
