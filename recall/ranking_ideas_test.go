package recall

import (
	"fmt"
	"testing"
	"time"

	"koe/textindex"
)

// with is the default ranking with every idea off (so that a test sees
// one at a time), changed by set.
func with(set func(*Ranking)) *Ranking {
	rk := DefaultRanking
	rk.Temporal, rk.Feedback, rk.Spread, rk.Coverage, rk.QueryStops = 0, 0, 0, false, false
	set(&rk)
	return &rk
}

// annSays is n lines of Ann's, format numbering them from 1.
func annSays(n int, format string) []say {
	out := make([]say, n)
	for i := range out {
		out[i] = user("Ann", fmt.Sprintf(format, i+1))
	}
	return out
}

// plain is the default ranking with every idea off.
func plain() *Ranking { return with(func(*Ranking) {}) }

// TestTemporalLiftsWhatSaysWhen: asked when, the message that dates the
// adoption outranks a shorter one that only mentions it; not asked when,
// or with Temporal off, the shorter one stays first.
func TestTemporalLiftsWhatSaysWhen(t *testing.T) {
	f := newFixture(t, Options{})
	const plain, dated = "We adopted a puppy", "We adopted the puppy last month, she is sweet"
	f.create("mika", "a", talk(t0, user("Ann", plain), mika("Lovely."))...)
	f.create("mika", "b", talk(t0.Add(48*time.Hour), user("Ann", dated), mika("Lovely."))...)
	f.settle()
	on, off := with(func(r *Ranking) { r.Temporal = 1 }), with(func(r *Ranking) { r.Temporal = 0 })
	for _, c := range []struct {
		q     string
		rk    *Ranking
		first string
	}{
		{"When did they adopt the puppy?", on, dated},
		{"When did they adopt the puppy?", off, plain},
		{"Did they adopt a puppy?", on, plain},
	} {
		b := f.recall(Query{ConfUID: "mika", Text: c.q, Ranking: c.rk})
		if rankOf(b, c.first) != 1 {
			t.Errorf("%q (temporal %v): want %q first:\n%s", c.q, c.rk.Temporal, c.first, b.Text)
		}
	}
}

// TestTemporalSteersToTheMonthNamed: the same words said in April and in
// May; a question naming May 2023 gets May's first.
func TestTemporalSteersToTheMonthNamed(t *testing.T) {
	f := newFixture(t, Options{})
	april := time.Date(2023, 4, 20, 18, 0, 0, 0, time.Local)
	may := time.Date(2023, 5, 25, 18, 0, 0, 0, time.Local)
	f.create("mika", "a", talk(april, user("Ann", "I baked sourdough bread"), mika("Yum."))...)
	f.create("mika", "b", talk(may, user("Ann", "I baked sourdough bread"), mika("Yum."))...)
	f.settle()
	firstTime := func(rk *Ranking) time.Time {
		b := f.recall(Query{ConfUID: "mika", Text: "What did Ann bake in May 2023?", Ranking: rk})
		for _, m := range b.Memories {
			if m.Rank == 1 {
				return m.Time
			}
		}
		t.Fatalf("nothing recalled:\n%s", b.Text)
		return time.Time{}
	}
	if got := firstTime(with(func(r *Ranking) { r.Temporal = 0.5 })); !got.Equal(may) {
		t.Errorf("with Temporal the first memory is of %s, want May's", got)
	}
	if got := firstTime(with(func(r *Ranking) { r.Temporal = 0 })); !got.Equal(april) {
		t.Errorf("without Temporal the first memory is of %s: the tie should go to the older", got)
	}
}

func TestTimeWords(t *testing.T) {
	for text, want := range map[string]bool{
		"I may go to the gym":             false,
		"we met in May":                   true,
		"it was March 3":                  true,
		"armies march on":                 false,
		"back in 2019 I lived in Berlin":  true,
		"we went camping last weekend":    true,
		"I painted a lake sunrise":        false,
		"my 2 dogs":                       false,
		"She turned three a few days ago": true,
	} {
		if got := saysWhen(textindex.Words(text)); got != want {
			t.Errorf("saysWhen(%q) = %v", text, got)
		}
	}
	for q, want := range map[string]timeQuestion{
		"When did Ann move?":                 {asked: true},
		"How long has Ann been painting?":    {asked: true},
		"What year did Ann start?":           {asked: true},
		"What did Ann do in May 2023?":       {asked: true, month: time.May, year: 2023},
		"What may Ann like?":                 {},
		"What did Ann paint?":                {},
		"Where did Ann go in July?":          {asked: true, month: time.July},
		"Which book did Ann read in 2022?":   {asked: true, year: 2022},
		"Has Ann been hiking since the fall": {asked: true},
	} {
		if got := askedWhen(textindex.Words(q)); got != want {
			t.Errorf("askedWhen(%q) = %+v, want %+v", q, got, want)
		}
	}
}

// TestFeedbackFindsTheOtherOccasion: the guidebook shares no word with
// the question; the trip's message does, and its "Kyoto" finds it.
func TestFeedbackFindsTheOtherOccasion(t *testing.T) {
	f := newFixture(t, Options{})
	const trip, book = "I am planning a trip to Kyoto in the autumn", "I bought a guidebook about Kyoto temples"
	f.create("mika", "a", talk(t0, user("Ann", trip), mika("How exciting!"))...)
	f.create("mika", "b", talk(t0.Add(48*time.Hour), user("Ann", "the bakery sells good bread"), mika("Yum."))...)
	f.create("mika", "c", talk(t0.Add(96*time.Hour), user("Ann", book), mika("Good idea."))...)
	f.settle()
	q := Query{ConfUID: "mika", Text: "What did Ann get for her trip?", Ranking: plain()}
	if b := f.recall(q); !has(b, trip) || has(b, book) {
		t.Fatalf("without feedback: want the trip and not the guidebook:\n%s", b.Text)
	}
	q.Ranking = with(func(r *Ranking) { r.Feedback = 0.5 })
	b := f.recall(q)
	if !has(b, trip) || !has(b, book) {
		t.Fatalf("with feedback: want the trip and the guidebook:\n%s", b.Text)
	}
	if rankOf(b, trip) > rankOf(b, book) {
		t.Errorf("the second round's find (rank %d) outranks the first's (rank %d)", rankOf(b, book), rankOf(b, trip))
	}
	if has(b, "the bakery sells good bread") {
		t.Errorf("feedback brought in what neither round matches:\n%s", b.Text)
	}
}

// TestSpreadAcrossSessions: one session says "guitar" six times; another
// once, in a longer message. With Spread, the other session's message
// ranks among the first three.
func TestSpreadAcrossSessions(t *testing.T) {
	f := newFixture(t, Options{})
	lines := annSays(6, "guitar lesson %d today")
	const other = "I played my old guitar at the open mic night downtown with a few friends"
	f.create("mika", "a", talk(t0, lines...)...)
	f.create("mika", "b", talk(t0.Add(48*time.Hour), user("Ann", other), mika("Bravo."))...)
	f.settle()
	q := Query{ConfUID: "mika", Text: "guitar", Ranking: plain()}
	if r := rankOf(f.recall(q), other); r <= 3 {
		t.Fatalf("without Spread the other session ranks %d: the test shows nothing", r)
	}
	q.Ranking = with(func(r *Ranking) { r.Spread = 0.5 })
	if b := f.recall(q); rankOf(b, other) == 0 || rankOf(b, other) > 3 {
		t.Fatalf("with Spread the other session ranks %d:\n%s", rankOf(b, other), b.Text)
	}
}

// TestQueryStops: "kind" and "likely" frame the question; dropped, the
// message about what she enjoys comes first.
func TestQueryStops(t *testing.T) {
	f := newFixture(t, Options{})
	const polite, jazz = "That is kind of you, I will likely come", "I enjoy jazz on quiet evenings"
	f.create("mika", "a", talk(t0, user("Ann", polite), mika("Great."))...)
	f.create("mika", "b", talk(t0.Add(48*time.Hour), user("Ann", jazz), mika("Nice."))...)
	f.settle()
	q := Query{ConfUID: "mika", Text: "What kind of music would she likely enjoy?", Ranking: plain()}
	if rankOf(f.recall(q), polite) != 1 {
		t.Fatal("without query stop words the polite message should match best: the test shows nothing")
	}
	q.Ranking = with(func(r *Ranking) { r.QueryStops = true })
	if b := f.recall(q); rankOf(b, jazz) != 1 || has(b, polite) {
		t.Fatalf("with query stop words want only the jazz message:\n%s", b.Text)
	}
}

// TestWindow: the answer three messages after the question comes along
// with a window of three, not of two.
func TestWindow(t *testing.T) {
	f := newFixture(t, Options{})
	const answer = "Mushroom risotto!"
	f.create("mika", "a", talk(t0,
		user("Ann", "Guess what I cooked for the party?"),
		mika("Tell me."),
		user("Ann", "You will never guess."),
		mika(answer),
	)...)
	f.settle()
	q := Query{ConfUID: "mika", Text: "what did she cook for the party?", Ranking: plain()}
	if has(f.recall(q), answer) {
		t.Fatal("the answer came with the default window of two")
	}
	q.Ranking = with(func(r *Ranking) { r.Window = 3 })
	if b := f.recall(q); !has(b, answer) {
		t.Fatalf("window 3: the answer three places away is not recalled:\n%s", b.Text)
	}
}

// TestCoverage: one session says "guitar" eight times, another says
// "guitar", "concert" and "tickets" once each. Summed, the first session
// scores higher; by coverage, the second does.
func TestCoverage(t *testing.T) {
	f := newFixture(t, Options{})
	lines := annSays(8, "guitar practice, day %d")
	f.create("mika", "a", talk(t0, lines...)...)
	var filler []say
	for i := range 30 {
		filler = append(filler, mika(fmt.Sprintf("soup number %d was warm", i)))
	}
	f.create("mika", "c", talk(t0.Add(96*time.Hour), filler...)...)
	f.create("mika", "b", talk(t0.Add(48*time.Hour),
		user("Ann", "I got concert tickets"), mika("Who plays?"), user("Ann", "a guitar trio"))...)
	f.settle()
	c, err := f.svc.character(ctxT(t), "mika")
	if err != nil {
		t.Fatal(err)
	}
	terms := textindex.Terms("guitar concert tickets")
	c.mu.RLock()
	defer c.mu.RUnlock()
	summed := map[int]float64{}
	for _, h := range c.words.Score(terms) {
		summed[c.entries[h.ID].session] += h.Score
	}
	covered, best := c.coverageLocked(terms)
	a, b := c.entries[c.byHistory["a"][0]].session, c.entries[c.byHistory["b"][0]].session
	if summed[a] <= summed[b] {
		t.Fatalf("summed: a %.2f, b %.2f: the test shows nothing", summed[a], summed[b])
	}
	if covered[b] <= covered[a] || best != covered[b] {
		t.Errorf("by coverage: a %.2f, b %.2f, best %.2f", covered[a], covered[b], best)
	}
}
