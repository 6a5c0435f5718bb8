package recall

import (
	"fmt"
	"testing"
	"time"

	"koe"
)

// TestIndexerSavesNotedHistoriesTogether: histories noted while the
// indexer is busy are saved at the same time (so that the bolt store
// commits them with one disk sync), and every one ends up indexed in
// full. The first save of each waits until the other's is under way: an
// indexer taking them one after another never gets there.
func TestIndexerSavesNotedHistoriesTogether(t *testing.T) {
	f := newFixture(t, Options{IndexAtOnce: IndexAtOnce})
	ctx := ctxT(t)

	busy, release := make(chan struct{}), make(chan struct{})
	arrived := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	failed := make(chan string, 2)
	f.cs.setAfterSave(func(conf, uid string, _ []koe.RecallEntry) {
		switch uid {
		case "first":
			close(busy)
			<-release
		case "a", "b":
			other := map[string]string{"a": "b", "b": "a"}[uid]
			select {
			case <-arrived[uid]:
				return // a later save of the same history
			default:
			}
			close(arrived[uid])
			select {
			case <-arrived[other]:
			case <-ctx.Done():
				failed <- uid
			}
		}
	})

	f.create("mika", "first", talk(t0, user("Ann", "the first walk"))...)
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal("the indexer never saved the first history")
	}
	for i, uid := range []string{"a", "b"} {
		f.create("mika", uid, talk(t0.Add(time.Duration(i+1)*time.Hour),
			user("Ann", fmt.Sprintf("walk %s by the harbour", uid)), mika(fmt.Sprintf("The %s harbour walk was windy.", uid)))...)
	}
	close(release)
	settled := make(chan error, 1)
	go func() { settled <- f.svc.Settle(ctx) }()
	select {
	case uid := <-failed:
		t.Fatalf("history %s was saved while the other waited to be indexed: the indexer saves one history at a time", uid)
	case err := <-settled:
		if err != nil {
			t.Fatalf("Settle: %v", err)
		}
	}

	for _, uid := range []string{"first", "a", "b"} {
		last, err := f.store.LastSeq(ctx, "mika", uid)
		if err != nil {
			t.Fatal(err)
		}
		mark, _, err := f.store.RecallMark(ctx, "mika", uid)
		if err != nil {
			t.Fatal(err)
		}
		if mark.Seq != last {
			t.Errorf("history %s: recall mark at %d, its last record is %d", uid, mark.Seq, last)
		}
	}
	for _, uid := range []string{"a", "b"} {
		b := f.recall(Query{ConfUID: "mika", HistoryUID: "other", Text: uid + " harbour walk"})
		if !has(b, fmt.Sprintf("The %s harbour walk was windy.", uid)) {
			t.Errorf("recall of history %s's walk: %+v", uid, b)
		}
	}
}
