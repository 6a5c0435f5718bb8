package recall

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"koe"
)

func TestDeletedHistoryIsForgotten(t *testing.T) {
	ctx := t.Context()
	for _, how := range []string{"ForgetHistory", "Noted"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t, Options{})
			dogHistories(f)
			q := Query{ConfUID: "mika", Text: "what is my dog's name?"}
			if !has(f.recall(q), dogFact) {
				t.Fatal("not recalled before the delete")
			}
			if err := f.store.Delete(ctx, "mika", "a"); err != nil {
				t.Fatal(err)
			}
			// The hub tells recall of a delete; an indexer that meets the
			// history gone must forget it too.
			if how == "ForgetHistory" {
				f.svc.ForgetHistory("mika", "a")
			} else {
				f.svc.Noted("mika", "a")
				f.settle()
			}
			b := f.recall(q)
			for _, m := range b.Memories {
				if m.HistoryUID == "a" {
					t.Fatalf("recalled from the deleted history: %+v", m)
				}
			}
			if b.Indexed != 3 {
				t.Fatalf("Indexed = %d after the delete, want b's 3", b.Indexed)
			}
			st, _ := f.svc.Stats(ctxT(t), "mika")
			if st.Histories != 1 || st.Memories != 3 {
				t.Fatalf("Stats after the delete = %+v", st)
			}
			f.restart()
			if b := f.recall(q); has(b, dogFact) || b.Indexed != 3 {
				t.Fatalf("after a restart the deleted history is back:\n%s", b.Text)
			}
		})
	}
}

// TestDeleteRacesIndexer deletes each history right after noting it, so
// that the indexer meets it at every stage (not read yet, read but not
// saved, saved but not yet in memory); none may come back.
func TestDeleteRacesIndexer(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, Options{})
	f.create("mika", "keep", talk(t0, user("Ann", "the zebra at the zoo was asleep"), mika("Zebras sleep standing up."))...)
	const rounds = 60
	for i := range rounds {
		uid := fmt.Sprintf("doomed%d", i)
		recs := talk(t0.Add(time.Duration(i+1)*24*time.Hour),
			user("Ann", fmt.Sprintf("secret zebra number %d", i)),
			mika("I will keep the zebra secret."),
		)
		f.create("mika", uid, recs...)
		if i%3 == 0 {
			f.add("mika", uid, talk(t0.Add(time.Duration(i+1)*24*time.Hour+time.Hour), user("Ann", "one more zebra"))...)
		}
		if err := f.store.Delete(ctx, "mika", uid); err != nil {
			t.Fatal(err)
		}
		f.svc.ForgetHistory("mika", uid)
	}
	f.settle()
	check := func(when string) {
		t.Helper()
		b := f.recall(Query{ConfUID: "mika", Text: "zebra secret number", Budget: 4000})
		for _, m := range b.Memories {
			if m.HistoryUID != "keep" {
				t.Fatalf("%s: the deleted %s is recalled: %q", when, m.HistoryUID, m.Text)
			}
		}
		if b.Indexed != 2 || len(b.Memories) != 2 {
			t.Fatalf("%s: Indexed %d, %d memories; want keep's 2:\n%s", when, b.Indexed, len(b.Memories), b.Text)
		}
	}
	check("after Settle")
	marks, err := f.store.RecallMarks(ctx, "mika")
	if err != nil || len(marks) != 1 {
		t.Fatalf("marks left in the store: %v, %v", marks, err)
	}
	f.restart()
	check("after a restart")
}

func TestForgetOneMemory(t *testing.T) {
	f := newFixture(t, Options{})
	dogHistories(f)
	q := Query{ConfUID: "mika", Text: "what is my dog's name?"}
	seq := f.seqOf("mika", "a", dogFact)
	ok, err := f.svc.Forget(ctxT(t), "mika", "a", seq)
	if err != nil || !ok {
		t.Fatalf("Forget = %v, %v", ok, err)
	}
	if ok, err := f.svc.Forget(ctxT(t), "mika", "a", seq); err != nil || ok {
		t.Fatalf("Forget again = %v, %v; want false", ok, err)
	}
	b := f.recall(q)
	if has(b, dogFact) {
		t.Fatalf("a forgotten memory is recalled:\n%s", b.Text)
	}
	if !has(b, dogAnswer) {
		t.Fatalf("forgetting one message lost its neighbour too:\n%s", b.Text)
	}
	if b.Indexed != 8 {
		t.Fatalf("Indexed = %d, want 8", b.Indexed)
	}

	if err := f.svc.Rebuild(ctxT(t), "mika"); err != nil {
		t.Fatal(err)
	}
	if b := f.recall(q); has(b, dogFact) || !has(b, dogAnswer) || b.Indexed != 8 {
		t.Fatalf("after Rebuild (Indexed %d):\n%s", b.Indexed, b.Text)
	}
	f.restart()
	if b := f.recall(q); has(b, dogFact) || b.Indexed != 8 {
		t.Fatalf("after a restart (Indexed %d):\n%s", b.Indexed, b.Text)
	}
}

// TestForgetWhileIndexing forgets a memory between the indexer's saving
// it and its adding it to the index in memory.
func TestForgetWhileIndexing(t *testing.T) {
	f := newFixture(t, Options{})
	f.create("mika", "a", talk(t0, user("Ann", "hello"))...)
	f.settle()
	var forgot bool
	f.cs.setAfterSave(func(conf, uid string, saved []koe.RecallEntry) {
		for _, e := range saved {
			if e.Text == dogFact && !forgot {
				forgot = true
				if _, err := f.svc.Forget(ctxT(t), conf, uid, e.Seq); err != nil {
					t.Errorf("Forget: %v", err)
				}
			}
		}
	})
	f.add("mika", "a", talk(t0.Add(time.Minute), user("Ann", dogFact), mika(dogAnswer))...)
	f.settle()
	if !forgot {
		t.Fatal("the hook never saw the fact saved")
	}
	if b := f.recall(Query{ConfUID: "mika", Text: "what is my dog's name?"}); has(b, dogFact) || !has(b, dogAnswer) {
		t.Fatalf("the memory forgotten while it was indexed is recalled:\n%s", b.Text)
	}
}

// TestRestartLoadsStoredIndex: after a restart the index comes from the
// store, without reading the histories again.
func TestRestartLoadsStoredIndex(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, Options{})
	dogHistories(f)
	marks, err := f.store.RecallMarks(ctx, "mika")
	if err != nil || len(marks) != 2 {
		t.Fatalf("marks = %v, %v", marks, err)
	}
	f.restart()
	if err := f.svc.Preload(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	f.settle()
	b := f.recall(Query{ConfUID: "mika", HistoryUID: "b", Exclude: []int{1, 2}, Text: "what is my dog's name?"})
	if !has(b, dogFact) {
		t.Fatalf("not recalled after a restart:\n%s", b.Text)
	}
	if n := f.cs.since.Load(); n != 0 {
		t.Fatalf("the histories were read %d times after a restart; the index should load from the store", n)
	}
	if after, _ := f.store.RecallMarks(ctx, "mika"); len(after) != 2 || after["a"] != marks["a"] || after["b"] != marks["b"] {
		t.Fatalf("marks moved: %v, were %v", after, marks)
	}
}

// TestStaleIndexCaughtUp: what was stored while no Service ran is indexed
// when the character loads, by Preload or by the first Recall.
func TestStaleIndexCaughtUp(t *testing.T) {
	ctx := t.Context()
	for _, how := range []string{"Preload", "Recall"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t, Options{})
			dogHistories(f)
			f.svc.Close()
			f.svc = nil
			later := t0.Add(200 * time.Hour)
			if err := f.store.Append(ctx, "mika", "a", koe.Record{Role: koe.RoleHuman, Name: "Ann", Content: "Biscuit learned to fetch the newspaper", Timestamp: later.Format("2006-01-02T15:04:05")}); err != nil {
				t.Fatal(err)
			}
			if err := f.store.CreateWith(ctx, "mika", "new", talk(later, user("Ann", "we moved Biscuit's basket to the kitchen"))...); err != nil {
				t.Fatal(err)
			}
			if err := f.store.CreateWith(ctx, "other", "x", talk(later, user("Ben", "Biscuit? never heard of him"))...); err != nil {
				t.Fatal(err)
			}
			opts := f.opts
			opts.Store, opts.Logger = f.cs, quietLogger()
			f.svc = New(opts)

			q := Query{ConfUID: "mika", Text: "what does Biscuit do?"}
			if how == "Preload" {
				if err := f.svc.Preload(ctxT(t)); err != nil {
					t.Fatal(err)
				}
			} else {
				// Loads each character, which may not hold the new records yet.
				f.recall(q)
				f.recall(Query{ConfUID: "other", Text: "Biscuit"})
			}
			f.settle()
			b := f.recall(q)
			for _, want := range []string{"Biscuit learned to fetch the newspaper", "we moved Biscuit's basket to the kitchen", dogFact} {
				if !has(b, want) {
					t.Errorf("%q not recalled:\n%s", want, b.Text)
				}
			}
			if b.Indexed != 11 {
				t.Errorf("Indexed = %d, want 11", b.Indexed)
			}
			if b := f.recall(Query{ConfUID: "other", Text: "Biscuit"}); !has(b, "Biscuit? never heard of him") {
				t.Errorf("the other character's new history was not indexed:\n%s", b.Text)
			}
		})
	}
}

// TestSummariesLiftTheirTurns: a summary that matches the question brings
// the turns it covers, though they hold none of its words; without the
// summaries view they stay out.
func TestSummariesLiftTheirTurns(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, Options{})
	f.create("mika", "a", talk(t0,
		user("Ann", "good morning"),
		mika("Morning!"),
		user("Ann", "we took the bullet train and saw temples"),
		mika("Did you see the golden pavilion?"),
		user("Ann", "yes, it shone in the sun"),
		mika("How beautiful."),
		user("Ann", "now I need to unpack"),
		mika("Take your time."),
	)...)
	f.create("mika", "b", talk(t0.Add(100*time.Hour), user("Ann", "I booked a trip to Kyoto for next year, another one"), mika("Again? You loved it."))...)
	f.settle()
	sum := koe.SummaryRecord{ThreadID: "a", Turns: []int{2, 3}, TurnLength: 2, Summary: "Ann told Mika about her trip to Kyoto."}
	if err := f.store.AddSummary(ctx, "mika", "a", sum); err != nil {
		t.Fatal(err)
	}
	f.svc.Noted("mika", "a")
	f.settle()

	q := Query{ConfUID: "mika", Text: "how was her Kyoto trip?"}
	b := f.recall(q)
	for _, want := range []string{"we took the bullet train and saw temples", "Did you see the golden pavilion?", "yes, it shone in the sun", "How beautiful."} {
		if !has(b, want) {
			t.Errorf("turn covered by the summary not recalled: %q\n%s", want, b.Text)
		}
	}
	if has(b, "now I need to unpack") || has(b, "good morning") {
		t.Errorf("turns the summary does not cover came along:\n%s", b.Text)
	}
	if !has(b, "I booked a trip to Kyoto for next year, another one") {
		t.Errorf("the keyword match is missing:\n%s", b.Text)
	}

	off := DefaultRanking
	off.Summaries = false
	q.Ranking = &off
	if b := f.recall(q); has(b, "we took the bullet train and saw temples") {
		t.Fatalf("without the summaries view the covered turns still come:\n%s", b.Text)
	}

	// A summary replaced by another moves what it lifts; the old one is gone.
	sum.Summary = "Ann said she needs to unpack after the journey."
	if err := f.store.AddSummary(ctx, "mika", "a", sum); err != nil {
		t.Fatal(err)
	}
	f.svc.Noted("mika", "a")
	f.settle()
	if b := f.recall(Query{ConfUID: "mika", Text: "how was her Kyoto trip?"}); has(b, "we took the bullet train and saw temples") {
		t.Fatalf("a replaced summary still lifts its turns:\n%s", b.Text)
	}
	// And after a restart the summaries are indexed again from the store.
	f.restart()
	sum.Summary = "Ann told Mika about her trip to Kyoto."
	if err := f.store.AddSummary(ctx, "mika", "a", sum); err != nil {
		t.Fatal(err)
	}
	if b := f.recall(Query{ConfUID: "mika", Text: "how was her Kyoto trip?"}); !has(b, "yes, it shone in the sun") {
		t.Fatalf("after a restart the summary does not lift its turns:\n%s", strings.TrimSpace(b.Text))
	}
}

// TestRebuildWhileIndexing rebuilds a character while the indexer is in
// the middle of a job: the job read the history's mark before the rebuild
// cleared the index, and saves after. The store must not end up claiming
// records indexed that are not. synctest holds the job until Rebuild has
// gone as far as it can.
func TestRebuildWhileIndexing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Options{})
		f.create("mika", "a", talk(t0,
			user("Ann", "my dog is called Biscuit"),
			mika("What a name!"),
			user("Ann", "he likes to fetch sticks"),
		)...)
		f.settle()

		release := make(chan struct{})
		var once sync.Once
		f.cs.setOnSince(func() { once.Do(func() { <-release }) })
		f.add("mika", "a", talk(t0.Add(10*time.Minute), user("Ann", "Biscuit is asleep now"))...)
		synctest.Wait() // the job has read the mark and waits in Since

		rebuilt := make(chan error, 1)
		go func() { rebuilt <- f.svc.Rebuild(context.Background(), "mika") }()
		synctest.Wait() // Rebuild went as far as it could beside the job
		close(release)
		if err := <-rebuilt; err != nil {
			t.Fatal(err)
		}
		f.settle()

		check := func(when string) {
			t.Helper()
			st, err := f.svc.Stats(context.Background(), "mika")
			if err != nil || st.Memories != 4 {
				t.Fatalf("%s: %d memories indexed, want 4 (%v)", when, st.Memories, err)
			}
			if b := f.recall(Query{ConfUID: "mika", Text: "what is my dog called?"}); !has(b, "my dog is called Biscuit") {
				t.Fatalf("%s: the fact is lost:\n%s", when, b.Text)
			}
		}
		check("after the rebuild")
		f.restart()
		f.settle()
		check("after a restart")
	})
}
