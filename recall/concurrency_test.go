package recall

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"koe"
)

// TestConcurrentUse recalls from several goroutines while messages are
// stored and noted, memories forgotten, histories deleted and summaries
// written; run it with -race. Afterwards the index holds exactly what it
// should.
func TestConcurrentUse(t *testing.T) {
	emb := &testEmbedder{model: "e1"}
	f := newFixture(t, Options{Embedder: emb})
	dogHistories(f)
	ctx := ctxT(t)

	// Messages to forget while everything else goes on.
	var forget []uint64
	var lines []say
	for i := range 40 {
		lines = append(lines, user("Ann", fmt.Sprintf("forgettable walk %d by the river", i)))
	}
	f.create("mika", "old", talk(t0.Add(300*time.Hour), lines...)...)
	f.settle()
	msgs, err := f.store.Messages(ctx, "mika", "old")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs[1:] {
		if m.Seq%2 == 0 {
			forget = append(forget, m.Seq)
		}
	}

	const writers, perWriter = 3, 40
	done := make(chan struct{})
	var work, readers sync.WaitGroup
	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}

	for w := range writers {
		work.Add(1)
		go func() {
			defer work.Done()
			uid := fmt.Sprintf("live%d", w)
			if err := f.store.CreateWith(ctx, "mika", uid); err != nil {
				report(err)
				return
			}
			for i := range perWriter {
				at := t0.Add(400*time.Hour + time.Duration(w*perWriter+i)*time.Minute)
				r := koe.Record{Role: koe.RoleHuman, Name: "Ann", Content: fmt.Sprintf("writer %d says river story %d", w, i), Timestamp: at.Format("2006-01-02T15:04:05")}
				if i%2 == 1 {
					r.Role, r.Name = koe.RoleAI, "Mika"
				}
				if err := f.store.Append(ctx, "mika", uid, r); err != nil {
					report(err)
					return
				}
				f.svc.Noted("mika", uid)
				if i == perWriter/2 {
					sum := koe.SummaryRecord{ThreadID: uid, Turns: []int{1, 2}, TurnLength: 2, Summary: "a river story"}
					if err := f.store.AddSummary(ctx, "mika", uid, sum); err != nil {
						report(err)
						return
					}
					f.svc.Noted("mika", uid)
				}
			}
		}()
	}
	work.Add(1)
	go func() {
		defer work.Done()
		for _, seq := range forget {
			if _, err := f.svc.Forget(ctx, "mika", "old", seq); err != nil {
				report(err)
				return
			}
		}
	}()
	work.Add(1)
	go func() {
		defer work.Done()
		for i := range 10 {
			uid := fmt.Sprintf("brief%d", i)
			if err := f.store.CreateWith(ctx, "mika", uid, talk(t0, user("Ann", "a river secret"))...); err != nil {
				report(err)
				return
			}
			f.svc.Noted("mika", uid)
			if err := f.store.Delete(ctx, "mika", uid); err != nil {
				report(err)
				return
			}
			f.svc.ForgetHistory("mika", uid)
		}
	}()
	for r := range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			queries := []string{"river walk", "what is my dog's name?", "tell me a story", "canine"}
			for i := 0; ; i++ {
				select {
				case <-done:
					if i > 0 {
						return
					}
				default:
				}
				b, err := f.svc.Recall(ctx, Query{ConfUID: "mika", HistoryUID: "live0", Exclude: []int{1}, Text: queries[(r+i)%len(queries)], Budget: 300})
				if err != nil {
					report(err)
					return
				}
				if b.Tokens > 300 {
					report(fmt.Errorf("block of %d tokens over a budget of 300", b.Tokens))
				}
				if _, err := f.svc.Stats(ctx, "mika"); err != nil {
					report(err)
					return
				}
			}
		}()
	}
	work.Wait()
	close(done)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	f.settle()

	want := 9 + 40 - len(forget) + writers*perWriter
	st, err := f.svc.Stats(context.Background(), "mika")
	if err != nil || st.Memories != want || st.Histories != 3+writers || st.WithVectors != want {
		t.Fatalf("Stats = %+v, %v; want %d memories of %d histories, all with vectors", st, err, want, 3+writers)
	}
	b := f.recall(Query{ConfUID: "mika", Text: "forgettable walk by the river", Budget: 4000})
	kept := 0
	for _, m := range b.Memories {
		if m.HistoryUID == "old" {
			if m.Seq%2 == 0 {
				t.Errorf("forgotten memory %d recalled", m.Seq)
			}
			kept++
		}
		if len(m.HistoryUID) > 5 && m.HistoryUID[:5] == "brief" {
			t.Errorf("deleted history %s recalled", m.HistoryUID)
		}
	}
	if kept != 40-len(forget) {
		t.Errorf("%d of the %d memories not forgotten recalled", kept, 40-len(forget))
	}
	f.restart()
	if st, _ := f.svc.Stats(context.Background(), "mika"); st.Memories != want {
		t.Fatalf("after a restart: %+v, want %d memories", st, want)
	}
}
