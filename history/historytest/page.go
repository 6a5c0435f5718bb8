package historytest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"koe"
)

// contents lists the Content of records, for compact comparisons.
func contents(rs []koe.Record) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Content)
	}
	return out
}

func testPage(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	uid := MustCreate(t, s, "c") // seq 1, metadata
	for i := 1; i <= 10; i++ {   // seq 2..11, plus a stray metadata record at 7
		MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Content: fmt.Sprint(i)})
		if i == 5 {
			MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleMetadata})
		}
	}
	all, err := s.Messages(ctx, "c", uid)
	if err != nil {
		t.Fatal(err)
	}
	seqOf := map[string]uint64{}
	for _, r := range all {
		seqOf[r.Content] = r.Seq
	}

	cases := []struct {
		before uint64
		limit  int
		want   []string
		more   bool
	}{
		{0, 3, []string{"8", "9", "10"}, true},
		{seqOf["8"], 3, []string{"5", "6", "7"}, true}, // skips the metadata between 5 and 6
		{seqOf["5"], 3, []string{"2", "3", "4"}, true},
		{seqOf["2"], 3, []string{"1"}, false}, // only the leading metadata is older
		{seqOf["1"], 3, []string{}, false},
		{1, 3, []string{}, false},
		{0, 10, []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}, false},
		{0, 100, []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}, false},
		{0, 9, []string{"2", "3", "4", "5", "6", "7", "8", "9", "10"}, true},
		{1000, 2, []string{"9", "10"}, true}, // past the end reads from the end
		{seqOf["10"] + 1, 1, []string{"10"}, true},
		{seqOf["6"], 1, []string{"5"}, true}, // before a metadata record's successor
		{seqOf["5"] + 1, 1, []string{"5"}, true},
	}
	for _, c := range cases {
		got, more, err := s.Page(ctx, "c", uid, c.before, c.limit)
		if err != nil {
			t.Errorf("Page(before %d, limit %d): %v", c.before, c.limit, err)
			continue
		}
		if !reflect.DeepEqual(contents(got), c.want) || more != c.more {
			t.Errorf("Page(before %d, limit %d) = %v, more %v; want %v, more %v", c.before, c.limit, contents(got), more, c.want, c.more)
		}
	}

	// Walking back page by page yields every non-metadata record once, as
	// Messages returns them.
	var walked []koe.Record
	before := uint64(0)
	for {
		page, more, err := s.Page(ctx, "c", uid, before, 4)
		if err != nil {
			t.Fatal(err)
		}
		walked = append(page, walked...)
		if !more {
			break
		}
		before = page[0].Seq
	}
	var want []koe.Record
	for _, r := range all {
		if r.Role != koe.RoleMetadata {
			want = append(want, r)
		}
	}
	if !reflect.DeepEqual(walked, want) {
		t.Fatalf("walked pages = %+v, want %+v", walked, want)
	}
}

func testPageEmptyHistory(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	uid := MustCreate(t, s, "c")
	got, more, err := s.Page(ctx, "c", uid, 0, 5)
	if err != nil || more || got == nil || len(got) != 0 {
		t.Fatalf("Page of empty history = %#v, %v, %v; want empty, false, nil", got, more, err)
	}
}

func testPageErrors(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	uid := MustCreate(t, s, "c")
	for _, limit := range []int{0, -1} {
		if _, _, err := s.Page(ctx, "c", uid, 0, limit); !errors.Is(err, koe.ErrInvalidPage) {
			t.Errorf("Page(limit %d): err = %v, want ErrInvalidPage", limit, err)
		}
	}
	if _, _, err := s.Page(ctx, "c", "missing", 0, 5); !errors.Is(err, koe.ErrNotFound) {
		t.Errorf("Page(missing history): err = %v, want ErrNotFound", err)
	}
	if _, _, err := s.Page(ctx, "other", uid, 0, 5); !errors.Is(err, koe.ErrNotFound) {
		t.Errorf("Page(other conf): err = %v, want ErrNotFound", err)
	}
	for _, id := range []string{"", "../x", "a/b"} {
		if _, _, err := s.Page(ctx, id, uid, 0, 5); !errors.Is(err, koe.ErrInvalidID) {
			t.Errorf("Page(conf %q): err = %v, want ErrInvalidID", id, err)
		}
		if _, _, err := s.Page(ctx, "c", id, 0, 5); !errors.Is(err, koe.ErrInvalidID) {
			t.Errorf("Page(history %q): err = %v, want ErrInvalidID", id, err)
		}
	}
}
