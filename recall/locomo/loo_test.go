package locomo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"koe/agent"
	"koe/recall"
)

// answerThreeAway is a conversation whose one question is answered three
// messages after the message holding its words: a window of two misses
// it, a window of three finds it.
func answerThreeAway(id, dish string, day int) Sample {
	date := time.Date(2023, 5, day, 18, 0, 0, 0, time.Local)
	turns := []Turn{
		{Speaker: "Ann", DiaID: "D1:1", Text: "Guess what I cooked for the " + id + " party?"},
		{Speaker: "Ben", DiaID: "D1:2", Text: "Tell me."},
		{Speaker: "Ann", DiaID: "D1:3", Text: "You will never guess."},
		{Speaker: "Ben", DiaID: "D1:4", Text: dish},
	}
	return Sample{ID: id, SpeakerA: "Ann", SpeakerB: "Ben",
		Sessions: []Session{{Number: 1, Date: date, Turns: turns}},
		QA:       []QA{{Question: "What did Ann cook for the " + id + " party?", Evidence: []string{"D1:4"}, Category: 4}}}
}

func windowGrid() []Dim {
	return []Dim{{Name: "window", Values: []float64{2, 3}, Idea: true,
		Get: func(r recall.Ranking) float64 { return float64(r.Window) },
		Set: func(r *recall.Ranking, v float64) { r.Window = int(v) }}}
}

// TestLeaveOneOut: each fold chooses the window on the other two
// conversations, where three finds their answers and two does not, and
// its held-out figure is the left-out conversation's under that choice;
// pinned to two, held out, nothing is found.
func TestLeaveOneOut(t *testing.T) {
	ctx := context.Background()
	samples := []Sample{answerThreeAway("garden", "Mushroom risotto!", 1), answerThreeAway("office", "Lemon tart!", 8), answerThreeAway("birthday", "Paella!", 15)}
	tok := agent.NewTokenizer("")
	r, err := Replay(ctx, samples, Options{Dir: t.TempDir(), Count: tok.Count})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The ideas off: the window alone decides.
	start := recall.Ranking{Near: 0.4, Far: 0.3, Window: 2, Session: 0.3, Named: 1.8}
	if rep, err := r.Report(ctx, []int{1000}, &start); err != nil || rep.Results[0].Found != 0 {
		t.Fatalf("window 2 finds %+v (%v): the test shows nothing", rep, err)
	}
	l, err := LeaveOneOut(ctx, r, LOOOptions{Budgets: []int{1000}, Grid: windowGrid(), Start: start})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Folds) != 3 {
		t.Fatalf("%d folds", len(l.Folds))
	}
	for i, f := range l.Folds {
		if f.HeldOut != samples[i].ID || f.Chosen.Window != 3 {
			t.Errorf("fold %d: left out %s, chose window %d", i, f.HeldOut, f.Chosen.Window)
		}
		if f.Trained.Results[0].Questions != 2 || f.Trained.Results[0].Found != 2 || f.Result.Results[0].Found != 1 {
			t.Errorf("fold %d: trained %+v, held out %+v", i, f.Trained.Results[0], f.Result.Results[0])
		}
	}
	if h := l.HeldOut.Results[0]; h.Questions != 3 || h.Found != 3 {
		t.Errorf("held out: %+v", h)
	}
	if l.Chosen.Window != 3 || l.Fitted.Results[0].Found != 3 {
		t.Errorf("fitted: window %d, %+v", l.Chosen.Window, l.Fitted.Results[0])
	}
	if len(l.Ideas) != 2 || l.Ideas[0].Value != 2 || l.Ideas[0].HeldOut.Results[0].Found != 0 || l.Ideas[1].HeldOut.Results[0].Found != 3 {
		t.Errorf("ideas: %+v", l.Ideas)
	}
	var out bytes.Buffer
	l.Write(&out)
	for _, want := range []string{"left out office: chose window=3", "HELD OUT", "FITTED", "window=2: 0.0% at 1000", "window=3: 100.0% at 1000"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	one, err := Replay(ctx, samples[:1], Options{Dir: t.TempDir(), Count: tok.Count})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if _, err := LeaveOneOut(ctx, one, LOOOptions{Budgets: []int{1000}, Grid: windowGrid(), Start: start}); err == nil || !strings.Contains(err.Error(), "at least two") {
		t.Errorf("one conversation: %v", err)
	}
}

// TestDefaultGridCoversRanking: every Dim's Set and Get agree, so the
// search reports what it tried.
func TestDefaultGridCoversRanking(t *testing.T) {
	for _, d := range DefaultGrid() {
		for _, v := range d.Values {
			var rk recall.Ranking
			d.Set(&rk, v)
			if got := d.Get(rk); got != v {
				t.Errorf("%s: set %v, got %v", d.Name, v, got)
			}
		}
		if got := FormatRanking([]Dim{d}, recall.DefaultRanking); !strings.HasPrefix(got, d.Name+"=") {
			t.Errorf("FormatRanking: %q", got)
		}
	}
}
