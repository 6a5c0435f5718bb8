package historytest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"koe"
)

func testRoundTrip(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	uid := MustCreate(t, s, "conf1")
	MustAppend(t, s, "conf1", uid, koe.Record{Role: koe.RoleHuman, Content: "hello", Name: "Human"})
	MustAppend(t, s, "conf1", uid, koe.Record{Role: koe.RoleAI, Content: "hi th", Name: "Mao", Avatar: "mao.png", Interrupted: true})
	MustAppend(t, s, "conf1", uid, koe.Record{Role: koe.RoleSystem, Content: "note", Timestamp: "2030-01-01T00:00:00"})

	got, err := s.Messages(ctx, "conf1", uid)
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	want := []koe.Record{
		{Seq: 1, Role: koe.RoleMetadata, Timestamp: "2025-03-04T05:06:07"},
		{Seq: 2, Role: koe.RoleHuman, Timestamp: "2025-03-04T05:06:08", Content: "hello", Name: "Human"},
		{Seq: 3, Role: koe.RoleAI, Timestamp: "2025-03-04T05:06:09", Content: "hi th", Name: "Mao", Avatar: "mao.png", Interrupted: true},
		{Seq: 4, Role: koe.RoleSystem, Timestamp: "2030-01-01T00:00:00", Content: "note"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Messages:\n got %+v\nwant %+v", got, want)
	}
	if ok, err := s.Exists(ctx, "conf1", uid); err != nil || !ok {
		t.Fatalf("Exists = %v, %v; want true, nil", ok, err)
	}
	if ok, err := s.Exists(ctx, "conf1", "nope"); err != nil || ok {
		t.Fatalf("Exists(missing) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.Exists(ctx, "conf2", uid); err != nil || ok {
		t.Fatalf("Exists(other conf) = %v, %v; want false, nil", ok, err)
	}
}

// The stored JSON must stay byte-compatible with Open-LLM-VTuber.
func testStoredJSON(t *testing.T, be Backend) {
	s := be.Open(t, StepClock(T0))
	uid := MustCreate(t, s, "c")
	MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleAI, Content: "x", Interrupted: true})
	MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "y"})
	vals := rawRecords(t, be, s, "c", uid)
	want := []string{
		`0000000000000001 {"role":"metadata","timestamp":"2025-03-04T05:06:07","content":""}`,
		`0000000000000002 {"role":"ai","timestamp":"2025-03-04T05:06:08","content":"x","interrupted":true}`,
		`0000000000000003 {"role":"human","timestamp":"2025-03-04T05:06:09","content":"y"}`,
	}
	if !reflect.DeepEqual(vals, want) {
		t.Fatalf("stored:\n got %q\nwant %q", vals, want)
	}
}

func testListOrdering(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	h1 := MustCreate(t, s, "c")                                                               // :07
	h2 := MustCreate(t, s, "c")                                                               // :08
	_ = MustCreate(t, s, "c")                                                                 // :09, metadata only: must not be listed
	h4 := MustCreate(t, s, "c")                                                               // :10
	other := MustCreate(t, s, "d")                                                            // :11, other conf: must not be listed
	MustAppend(t, s, "d", other, koe.Record{Role: koe.RoleHuman, Content: "elsewhere"})       // :12
	MustAppend(t, s, "c", h2, koe.Record{Role: koe.RoleHuman, Content: "h2 first"})           // :13
	MustAppend(t, s, "c", h1, koe.Record{Role: koe.RoleHuman, Content: "h1 first"})           // :14
	MustAppend(t, s, "c", h1, koe.Record{Role: koe.RoleAI, Content: "h1 reply", Name: "Mao"}) // :15
	MustAppend(t, s, "c", h4, koe.Record{Role: koe.RoleHuman, Content: "h4", Timestamp: "2025-03-04T05:06:13"})

	got, err := s.List(ctx, "c")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	// h2 and h4 tie on timestamp; the larger uid comes first.
	hi, lo := h2, h4
	hiMsg, loMsg := "h2 first", "h4"
	if h4 > h2 {
		hi, lo = h4, h2
		hiMsg, loMsg = "h4", "h2 first"
	}
	want := []koe.ListedHistory{
		{UID: h1, Timestamp: "2025-03-04T05:06:15", LatestMessage: koe.Record{Seq: 3, Role: koe.RoleAI, Timestamp: "2025-03-04T05:06:15", Content: "h1 reply", Name: "Mao"}, Opening: "h1 first"},
		{UID: hi, Timestamp: "2025-03-04T05:06:13", LatestMessage: koe.Record{Seq: 2, Role: koe.RoleHuman, Timestamp: "2025-03-04T05:06:13", Content: hiMsg}, Opening: hiMsg},
		{UID: lo, Timestamp: "2025-03-04T05:06:13", LatestMessage: koe.Record{Seq: 2, Role: koe.RoleHuman, Timestamp: "2025-03-04T05:06:13", Content: loMsg}, Opening: loMsg},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List:\n got %+v\nwant %+v", got, want)
	}

	// Newer activity moves a history to the front.
	MustAppend(t, s, "c", lo, koe.Record{Role: koe.RoleHuman, Content: "bump"})
	got, err = s.List(ctx, "c")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var order []string
	for _, sm := range got {
		order = append(order, sm.UID)
	}
	if want := []string{lo, h1, hi}; !reflect.DeepEqual(order, want) {
		t.Fatalf("List order after bump = %v, want %v", order, want)
	}
}

// A metadata record appended after real messages must not become the
// "latest message" shown in the listing.
func testListSkipsTrailingMetadata(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	h := MustCreate(t, s, "c")
	MustAppend(t, s, "c", h, koe.Record{Role: koe.RoleHuman, Content: "real"})
	MustAppend(t, s, "c", h, koe.Record{Role: koe.RoleMetadata})
	got, err := s.List(ctx, "c")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(got) != 1 || got[0].LatestMessage.Content != "real" || got[0].Timestamp != "2025-03-04T05:06:08" {
		t.Fatalf("List = %+v, want one entry with content %q at 05:06:08", got, "real")
	}
}

func testListUnknownConf(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	got, err := s.List(ctx, "nobody")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if got == nil || len(got) != 0 {
		t.Fatalf("List = %#v, want empty non-nil slice", got)
	}
	// A conf with only metadata-only histories is also empty.
	MustCreate(t, s, "quiet")
	got, err = s.List(ctx, "quiet")
	if err != nil || len(got) != 0 {
		t.Fatalf("List(quiet) = %+v, %v; want empty", got, err)
	}
}

func testDelete(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	keep := MustCreate(t, s, "c")
	gone := MustCreate(t, s, "c")
	MustAppend(t, s, "c", gone, koe.Record{Role: koe.RoleHuman, Content: "bye"})
	MustAppend(t, s, "c", keep, koe.Record{Role: koe.RoleHuman, Content: "stay"})

	if err := s.Delete(ctx, "c", gone); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Messages(ctx, "c", gone); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("Messages after Delete: err = %v, want ErrNotFound", err)
	}
	if ok, err := s.Exists(ctx, "c", gone); err != nil || ok {
		t.Fatalf("Exists after Delete = %v, %v", ok, err)
	}
	if err := s.Delete(ctx, "c", gone); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("second Delete: err = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "unknown-conf", gone); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("Delete in unknown conf: err = %v, want ErrNotFound", err)
	}
	msgs, err := s.Messages(ctx, "c", keep)
	if err != nil || len(msgs) != 2 || msgs[1].Content != "stay" {
		t.Fatalf("other history after Delete = %+v, %v", msgs, err)
	}
	list, err := s.List(ctx, "c")
	if err != nil || len(list) != 1 || list[0].UID != keep {
		t.Fatalf("List after Delete = %+v, %v; want only %s", list, err, keep)
	}
}

func testAppendMissing(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	h := MustCreate(t, s, "c")
	before := be.Dump(t, s)
	cases := []struct{ conf, uid string }{
		{"c", "2025-01-01_00-00-00_00000000000000000000000000000000"},
		{"unknown", h},
	}
	for _, c := range cases {
		err := s.Append(ctx, c.conf, c.uid, koe.Record{Role: koe.RoleHuman, Content: "x"})
		if !errors.Is(err, koe.ErrNotFound) {
			t.Errorf("Append(%q, %q): err = %v, want ErrNotFound", c.conf, c.uid, err)
		}
		if _, err := s.Messages(ctx, c.conf, c.uid); !errors.Is(err, koe.ErrNotFound) {
			t.Errorf("Messages(%q, %q): err = %v, want ErrNotFound", c.conf, c.uid, err)
		}
	}
	if after := be.Dump(t, s); after != before {
		t.Fatalf("Append to missing history changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// A failing Append inside a batch must not disturb appends batched with it.
func testAppendMissingConcurrentWithValid(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	h := MustCreate(t, s, "c")
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- s.Append(ctx, "c", h, koe.Record{Role: koe.RoleHuman, Content: "ok"})
		}()
		go func() {
			defer wg.Done()
			if err := s.Append(ctx, "c", "missing", koe.Record{Role: koe.RoleHuman}); !errors.Is(err, koe.ErrNotFound) {
				errs <- fmt.Errorf("missing append: %v", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	msgs, err := s.Messages(ctx, "c", h)
	if err != nil || len(msgs) != n+1 {
		t.Fatalf("Messages = %d records, %v; want %d", len(msgs), err, n+1)
	}
}

func testInvalidIDs(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	h := MustCreate(t, s, "c")
	MustAppend(t, s, "c", h, koe.Record{Role: koe.RoleHuman, Content: "x"})
	before := be.Dump(t, s)

	bad := []string{"", "../x", "a/b", strings.Repeat("a", 129), "\x00", ".hidden", "a..b", "..", "a b", "é", `a\b`}
	ops := map[string]func(conf, uid string) error{
		"Create": func(conf, _ string) error { _, err := s.Create(ctx, conf); return err },
		"Append": func(conf, uid string) error {
			return s.Append(ctx, conf, uid, koe.Record{Role: koe.RoleHuman, Content: "evil"})
		},
		"Messages": func(conf, uid string) error { _, err := s.Messages(ctx, conf, uid); return err },
		"List":     func(conf, _ string) error { _, err := s.List(ctx, conf); return err },
		"Delete":   func(conf, uid string) error { return s.Delete(ctx, conf, uid) },
		"Exists":   func(conf, uid string) error { _, err := s.Exists(ctx, conf, uid); return err },
	}
	takesUID := map[string]bool{"Append": true, "Messages": true, "Delete": true, "Exists": true}
	for name, op := range ops {
		for _, id := range bad {
			if err := op(id, h); !errors.Is(err, koe.ErrInvalidID) {
				t.Errorf("%s(conf=%q): err = %v, want ErrInvalidID", name, id, err)
			}
			if takesUID[name] {
				if err := op("c", id); !errors.Is(err, koe.ErrInvalidID) {
					t.Errorf("%s(uid=%q): err = %v, want ErrInvalidID", name, id, err)
				}
			}
		}
	}
	if after := be.Dump(t, s); after != before {
		t.Fatalf("invalid ids changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func testInvalidIDMessage(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	long := strings.Repeat("x", 60) + "/" + strings.Repeat("y", 100)
	err := s.Delete(ctx, "c", long)
	want := fmt.Sprintf("history uid %q: invalid id", long[:64]+"…")
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	err = s.Append(ctx, "a\nb", "ok", koe.Record{})
	if want := `conf uid "a\nb": invalid id`; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

func testNowOption(t *testing.T, be Backend) {
	ctx := t.Context()
	fixed := time.Date(2020, 2, 29, 13, 14, 15, 999, time.Local)
	s := be.Open(t, func() time.Time { return fixed })
	h := MustCreate(t, s, "c")
	if !strings.HasPrefix(h, "2020-02-29_13-14-15_") {
		t.Fatalf("uid %q does not use the Now clock", h)
	}
	MustAppend(t, s, "c", h, koe.Record{Role: koe.RoleHuman, Content: "x"})
	msgs, err := s.Messages(ctx, "c", h)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		if m.Timestamp != "2020-02-29T13:14:15" {
			t.Errorf("record %d timestamp = %q, want 2020-02-29T13:14:15", i, m.Timestamp)
		}
	}
}

func testConcurrentAppends(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	const goroutines, perG = 50, 20
	uids := make([]string, goroutines)
	for i := range uids {
		uids[i] = MustCreate(t, s, "c")
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perG; i++ {
				if err := s.Append(ctx, "c", uids[g], koe.Record{Role: koe.RoleHuman, Content: fmt.Sprintf("g%d-m%d", g, i)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	for g, uid := range uids {
		msgs, err := s.Messages(ctx, "c", uid)
		if err != nil {
			t.Fatalf("Messages: %v", err)
		}
		if len(msgs) != perG+1 {
			t.Fatalf("history %d has %d records, want %d", g, len(msgs), perG+1)
		}
		for i, m := range msgs[1:] {
			if want := fmt.Sprintf("g%d-m%d", g, i); m.Content != want {
				t.Fatalf("history %d record %d = %q, want %q", g, i+1, m.Content, want)
			}
		}
	}
	list, err := s.List(ctx, "c")
	if err != nil || len(list) != goroutines {
		t.Fatalf("List = %d entries, %v; want %d", len(list), err, goroutines)
	}
}

// LastSeq moves with every record stored and names the newest one.
func testLastSeq(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	h := MustCreate(t, s, "c")
	first, err := s.LastSeq(ctx, "c", h)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "c", h, koe.Record{Role: koe.RoleHuman, Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	next, err := s.LastSeq(ctx, "c", h)
	if err != nil || next == first {
		t.Fatalf("LastSeq after an append = %d, %v; before it %d", next, err, first)
	}
	msgs, _ := s.Messages(ctx, "c", h)
	if last := msgs[len(msgs)-1].Seq; last != next {
		t.Errorf("LastSeq = %d, the newest record is %d", next, last)
	}
	if _, err := s.LastSeq(ctx, "c", "2025-01-01_00-00-00_00000000000000000000000000000000"); !errors.Is(err, koe.ErrNotFound) {
		t.Errorf("LastSeq of a missing history: %v", err)
	}
}
