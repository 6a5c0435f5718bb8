package historytest

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"

	"koe"
)

// Re-summarising a range that starts at the same turn replaces the old
// summary, whatever its length; other summaries are untouched.
func testSummaryOverwrite(t *testing.T, be Backend) {
	s := be.Open(t, nil)
	h := MustCreate(t, s, "c")
	MustAddSummary(t, s, "c", h, Summary(h, 1, 3, "first try"))
	MustAddSummary(t, s, "c", h, Summary(h, 4, 3, "other"))
	second := Summary(h, 1, 3, "second try")
	second.CompressionRate, second.SummaryChars = 0.1, 100
	MustAddSummary(t, s, "c", h, second)

	got := MustSummaries(t, s, "c", h)
	if len(got) != 2 || got[0].Summary != "second try" || got[0].CompressionRate != 0.1 || got[0].SummaryChars != 100 || got[1].Summary != "other" {
		t.Fatalf("after overwrite: %+v", got)
	}

	MustAddSummary(t, s, "c", h, Summary(h, 1, 2, "shorter"))
	got = MustSummaries(t, s, "c", h)
	if len(got) != 2 || got[0].Summary != "shorter" || !reflect.DeepEqual(got[0].Turns, []int{1, 2}) || got[0].TurnLength != 2 {
		t.Fatalf("after overwrite with a shorter range: %+v", got)
	}
}

func testInvalidSummary(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	h := MustCreate(t, s, "c")
	MustAddSummary(t, s, "c", h, Summary(h, 1, 3, "keep me"))
	before := be.Dump(t, s)

	with := func(f func(r *koe.SummaryRecord)) koe.SummaryRecord {
		r := Summary(h, 4, 3, "bad")
		f(&r)
		return r
	}
	cases := map[string]koe.SummaryRecord{
		"nil turns":          with(func(r *koe.SummaryRecord) { r.Turns, r.TurnLength = nil, 0 }),
		"empty turns":        with(func(r *koe.SummaryRecord) { r.Turns, r.TurnLength = []int{}, 0 }),
		"gap":                with(func(r *koe.SummaryRecord) { r.Turns = []int{4, 5, 7} }),
		"descending":         with(func(r *koe.SummaryRecord) { r.Turns = []int{6, 5, 4} }),
		"repeated":           with(func(r *koe.SummaryRecord) { r.Turns = []int{4, 4, 5} }),
		"turn zero":          with(func(r *koe.SummaryRecord) { r.Turns = []int{0, 1, 2} }),
		"negative turn":      with(func(r *koe.SummaryRecord) { r.Turns = []int{-1, 0, 1} }),
		"wraps around":       with(func(r *koe.SummaryRecord) { r.Turns, r.TurnLength = []int{math.MaxInt, math.MinInt}, 2 }),
		"turn_length short":  with(func(r *koe.SummaryRecord) { r.TurnLength = 2 }),
		"turn_length zero":   with(func(r *koe.SummaryRecord) { r.TurnLength = 0 }),
		"other thread":       with(func(r *koe.SummaryRecord) { r.ThreadID = h + "x" }),
		"empty thread":       with(func(r *koe.SummaryRecord) { r.ThreadID = "" }),
		"negative original":  with(func(r *koe.SummaryRecord) { r.OriginalChars = -1 }),
		"negative summary":   with(func(r *koe.SummaryRecord) { r.SummaryChars = -1 }),
		"rate 1.5":           with(func(r *koe.SummaryRecord) { r.CompressionRate = 1.5 }),
		"rate negative":      with(func(r *koe.SummaryRecord) { r.CompressionRate = -0.1 }),
		"rate NaN":           with(func(r *koe.SummaryRecord) { r.CompressionRate = math.NaN() }),
		"rate +Inf":          with(func(r *koe.SummaryRecord) { r.CompressionRate = math.Inf(1) }),
		"overwrite attempt":  with(func(r *koe.SummaryRecord) { r.Turns = []int{1, 2, 2} }), // would replace "keep me"
		"first turn invalid": with(func(r *koe.SummaryRecord) { r.Turns, r.TurnLength = []int{0}, 1 }),
	}
	for name, r := range cases {
		err := s.AddSummary(ctx, "c", h, r)
		if !errors.Is(err, koe.ErrInvalidRecord) {
			t.Errorf("%s: err = %v, want ErrInvalidRecord", name, err)
		}
	}
	if after := be.Dump(t, s); after != before {
		t.Fatalf("invalid summaries changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// The bounds themselves are valid.
	for _, rate := range []float64{0, 1} {
		r := Summary(h, 4, 3, "edge")
		r.CompressionRate, r.OriginalChars, r.SummaryChars = rate, 0, 0
		if err := s.AddSummary(ctx, "c", h, r); err != nil {
			t.Errorf("AddSummary with rate %v and zero counts: %v", rate, err)
		}
	}
}

func testInvalidSummaryMessage(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	h := MustCreate(t, s, "c")
	r := Summary(h, 1, 3, "x")
	r.Turns = []int{1, 2, 4}
	err := s.AddSummary(ctx, "c", h, r)
	want := fmt.Sprintf(`add summary to history %q of conf "c": summary: turns 2 and 4 are not consecutive: invalid record`, h)
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

func testMemoryInvalidIDs(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	h := MustCreate(t, s, "c")
	MustAddSummary(t, s, "c", h, Summary(h, 1, 3, "x"))
	if err := s.SetPrompt(ctx, "c", koe.PromptSystem, "sys"); err != nil {
		t.Fatal(err)
	}
	before := be.Dump(t, s)

	bad := []string{"", "../x", "a/b", strings.Repeat("a", 129), "\x00", ".hidden", "a..b", "..", "a b", "é", `a\b`}
	for _, id := range bad {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, koe.ErrInvalidID) {
				t.Errorf("%s with %q: err = %v, want ErrInvalidID", op, id, err)
			}
		}
		check("AddSummary conf", s.AddSummary(ctx, id, h, Summary(h, 4, 3, "evil")))
		check("AddSummary uid", s.AddSummary(ctx, "c", id, Summary(id, 4, 3, "evil")))
		_, err := s.Summaries(ctx, id, h)
		check("Summaries conf", err)
		_, err = s.Summaries(ctx, "c", id)
		check("Summaries uid", err)
		check("SetPrompt conf", s.SetPrompt(ctx, id, koe.PromptSystem, "evil"))
		check("SetPrompt name", s.SetPrompt(ctx, "c", id, "evil"))
		check("SetPrompt name delete", s.SetPrompt(ctx, "c", id, ""))
		_, _, err = s.Prompt(ctx, id, koe.PromptSystem)
		check("Prompt conf", err)
		_, _, err = s.Prompt(ctx, "c", id)
		check("Prompt name", err)
	}
	if after := be.Dump(t, s); after != before {
		t.Fatalf("invalid ids changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if err := s.SetPrompt(ctx, "c", "a/b", "x"); err == nil || !strings.Contains(err.Error(), "prompt name") {
		t.Errorf("SetPrompt with bad name: err = %v, want it to say prompt name", err)
	}
}

func testSummaryMissingHistory(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	h := MustCreate(t, s, "c")
	before := be.Dump(t, s)
	missing := "2025-01-01_00-00-00_00000000000000000000000000000000"
	cases := []struct{ conf, uid string }{
		{"c", missing},
		{"unknown", h},
	}
	for _, c := range cases {
		if err := s.AddSummary(ctx, c.conf, c.uid, Summary(c.uid, 1, 3, "x")); !errors.Is(err, koe.ErrNotFound) {
			t.Errorf("AddSummary(%q, %q): err = %v, want ErrNotFound", c.conf, c.uid, err)
		}
		if got, err := s.Summaries(ctx, c.conf, c.uid); !errors.Is(err, koe.ErrNotFound) || got != nil {
			t.Errorf("Summaries(%q, %q) = %v, %v; want nil, ErrNotFound", c.conf, c.uid, got, err)
		}
	}
	if after := be.Dump(t, s); after != before {
		t.Fatalf("AddSummary to a missing history changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func testDeleteRemovesSummaries(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	gone := MustCreate(t, s, "c")
	keep := MustCreate(t, s, "c")
	MustAppend(t, s, "c", gone, koe.Record{Role: koe.RoleHuman, Content: "bye"})
	MustAddSummary(t, s, "c", gone, Summary(gone, 1, 3, "forget me"))
	MustAddSummary(t, s, "c", keep, Summary(keep, 1, 3, "remember me"))

	if err := s.Delete(ctx, "c", gone); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Summaries(ctx, "c", gone); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("Summaries after Delete: err = %v, want ErrNotFound", err)
	}
	if err := s.AddSummary(ctx, "c", gone, Summary(gone, 4, 3, "late")); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("AddSummary after Delete: err = %v, want ErrNotFound", err)
	}
	if d := be.Dump(t, s); strings.Contains(d, gone) || strings.Contains(d, "forget me") {
		t.Fatalf("deleted history left data behind:\n%s", d)
	}
	// A history created again under the same uid starts without summaries.
	if err := s.CreateWith(ctx, "c", gone); err != nil {
		t.Fatalf("CreateWith: %v", err)
	}
	if got := MustSummaries(t, s, "c", gone); len(got) != 0 {
		t.Fatalf("recreated history has summaries %+v", got)
	}
	if got := MustSummaries(t, s, "c", keep); len(got) != 1 || got[0].Summary != "remember me" {
		t.Fatalf("other history's summaries after Delete = %+v", got)
	}
}

// Summaries are side data: messages, the listing and Exists must not see them.
func testMessagesIgnoreSummaries(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	h := MustCreate(t, s, "c")
	MustAppend(t, s, "c", h, koe.Record{Role: koe.RoleHuman, Content: "hello"})
	MustAppend(t, s, "c", h, koe.Record{Role: koe.RoleAI, Content: "hi"})
	wantMsgs, err := s.Messages(ctx, "c", h)
	if err != nil {
		t.Fatal(err)
	}
	wantList, err := s.List(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}

	MustAddSummary(t, s, "c", h, Summary(h, 1, 3, "sum"))
	MustAddSummary(t, s, "c", h, Summary(h, 4, 3, "sum2"))

	if got, err := s.Messages(ctx, "c", h); err != nil || !reflect.DeepEqual(got, wantMsgs) {
		t.Fatalf("Messages after AddSummary = %+v, %v; want %+v", got, err, wantMsgs)
	}
	if got, err := s.List(ctx, "c"); err != nil || !reflect.DeepEqual(got, wantList) {
		t.Fatalf("List after AddSummary = %+v, %v; want %+v", got, err, wantList)
	}
	if ok, err := s.Exists(ctx, "c", h); err != nil || !ok {
		t.Fatalf("Exists after AddSummary = %v, %v", ok, err)
	}
	// Appending after summaries still continues the message sequence.
	MustAppend(t, s, "c", h, koe.Record{Role: koe.RoleHuman, Content: "more"})
	got, err := s.Messages(ctx, "c", h)
	if err != nil || len(got) != len(wantMsgs)+1 || got[len(got)-1].Content != "more" {
		t.Fatalf("Messages after append = %+v, %v", got, err)
	}
}

func testPrompts(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	get := func(conf, name string) (string, bool) {
		t.Helper()
		text, ok, err := s.Prompt(ctx, conf, name)
		if err != nil {
			t.Fatalf("Prompt(%q, %q): %v", conf, name, err)
		}
		return text, ok
	}
	set := func(conf, name, text string) {
		t.Helper()
		if err := s.SetPrompt(ctx, conf, name, text); err != nil {
			t.Fatalf("SetPrompt(%q, %q): %v", conf, name, err)
		}
	}

	before := be.Dump(t, s)
	if text, ok := get("a", koe.PromptSystem); ok || text != "" {
		t.Fatalf("unset prompt = %q, %v; want \"\", false", text, ok)
	}
	set("a", koe.PromptSystem, "") // resetting an unset prompt is a no-op
	if after := be.Dump(t, s); after != before {
		t.Fatalf("reading and resetting unset prompts changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	sys := "You are Mao.\nAnswer in «short» sentences. 日本語もOK."
	set("a", koe.PromptSystem, sys)
	set("a", koe.PromptReminder, "cite sources")
	set("b", koe.PromptSystem, "You are Shizuku.")
	if text, ok := get("a", koe.PromptSystem); !ok || text != sys {
		t.Fatalf("a/system = %q, %v", text, ok)
	}
	if text, ok := get("a", koe.PromptReminder); !ok || text != "cite sources" {
		t.Fatalf("a/reminder = %q, %v", text, ok)
	}
	if text, ok := get("b", koe.PromptSystem); !ok || text != "You are Shizuku." {
		t.Fatalf("b/system = %q, %v", text, ok)
	}
	if _, ok := get("b", koe.PromptReminder); ok {
		t.Fatal("b/reminder set, but only a's reminder was")
	}

	set("a", koe.PromptSystem, "overwritten")
	if text, ok := get("a", koe.PromptSystem); !ok || text != "overwritten" {
		t.Fatalf("a/system after overwrite = %q, %v", text, ok)
	}
	if text, _ := get("b", koe.PromptSystem); text != "You are Shizuku." {
		t.Fatalf("overwriting a's prompt changed b's to %q", text)
	}

	set("a", koe.PromptSystem, "")
	if text, ok := get("a", koe.PromptSystem); ok || text != "" {
		t.Fatalf("a/system after reset = %q, %v; want unset", text, ok)
	}
	if _, ok := get("a", koe.PromptReminder); !ok {
		t.Fatal("resetting a/system also reset a/reminder")
	}
	if _, ok := get("b", koe.PromptSystem); !ok {
		t.Fatal("resetting a/system also reset b/system")
	}

	// Resetting every prompt leaves nothing behind.
	set("a", koe.PromptReminder, "")
	set("b", koe.PromptSystem, "")
	if after := be.Dump(t, s); after != before {
		t.Fatalf("resetting every prompt left data behind:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Names are not limited to the two koe uses.
	set("a", "custom-agent", "x")
	if text, ok := get("a", "custom-agent"); !ok || text != "x" {
		t.Fatalf("custom prompt = %q, %v", text, ok)
	}
}

func testPromptTooLong(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	limit := strings.Repeat("x", 64<<10)
	if err := s.SetPrompt(ctx, "c", koe.PromptSystem, limit); err != nil {
		t.Fatalf("SetPrompt of exactly 64 KiB: %v", err)
	}
	before := be.Dump(t, s)
	for _, n := range []int{64<<10 + 1, 1 << 20} {
		if err := s.SetPrompt(ctx, "c", koe.PromptSystem, strings.Repeat("y", n)); !errors.Is(err, koe.ErrInvalidRecord) {
			t.Errorf("SetPrompt of %d bytes: err = %v, want ErrInvalidRecord", n, err)
		}
		if err := s.SetPrompt(ctx, "c", koe.PromptReminder, strings.Repeat("y", n)); !errors.Is(err, koe.ErrInvalidRecord) {
			t.Errorf("SetPrompt of %d bytes (new name): err = %v, want ErrInvalidRecord", n, err)
		}
	}
	if after := be.Dump(t, s); after != before {
		t.Fatal("rejected prompts changed the database")
	}
	if text, ok, err := s.Prompt(ctx, "c", koe.PromptSystem); err != nil || !ok || text != limit {
		t.Fatalf("prompt after rejected overwrite: %d bytes, %v, %v", len(text), ok, err)
	}
}

// Summaries are written in the background while the session appends; both
// go through db.Batch, together with calls that fail for a missing history.
func testConcurrentSummariesAndAppends(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	h := MustCreate(t, s, "c")
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i := range n {
		wg.Add(3)
		go func() {
			defer wg.Done()
			if err := s.Append(ctx, "c", h, koe.Record{Role: koe.RoleHuman, Content: fmt.Sprint("m", i)}); err != nil {
				errs <- fmt.Errorf("append %d: %w", i, err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := s.AddSummary(ctx, "c", h, Summary(h, 3*i+1, 3, fmt.Sprint("s", i))); err != nil {
				errs <- fmt.Errorf("AddSummary %d: %w", i, err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := s.AddSummary(ctx, "c", "missing", Summary("missing", 1, 3, "x")); !errors.Is(err, koe.ErrNotFound) {
				errs <- fmt.Errorf("AddSummary to missing history: err = %v, want ErrNotFound", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	msgs, err := s.Messages(ctx, "c", h)
	if err != nil || len(msgs) != n+1 {
		t.Fatalf("Messages = %d records, %v; want %d", len(msgs), err, n+1)
	}
	seen := map[string]bool{}
	for _, m := range msgs[1:] {
		seen[m.Content] = true
	}
	if len(seen) != n {
		t.Fatalf("got %d distinct messages, want %d", len(seen), n)
	}
	sums := MustSummaries(t, s, "c", h)
	if len(sums) != n {
		t.Fatalf("Summaries = %d, want %d", len(sums), n)
	}
	for i, r := range sums {
		if want := fmt.Sprint("s", i); r.Summary != want || r.Turns[0] != 3*i+1 {
			t.Fatalf("summary %d = %q at turn %d, want %q at turn %d", i, r.Summary, r.Turns[0], want, 3*i+1)
		}
	}
}
