package recall

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"koe"
	"koe/agent"
)

const (
	dogFact   = "my dog is called Biscuit, he is a beagle"
	dogAnswer = "Biscuit is such a sweet name for a beagle!"
)

// dogHistories stores, for conf "mika", a conversation that says the dog's
// name and another about something else, and for conf "rei" one about
// cats; it leaves everything indexed.
func dogHistories(f *fixture) {
	f.create("mika", "a", talk(t0,
		user("Ann", "good morning"),
		mika("Good morning, Ann! How did you sleep?"),
		user("Ann", dogFact),
		mika(dogAnswer),
		user("Ann", "I have to go to work now"),
		mika("Have a good day at the office."),
	)...)
	f.create("mika", "b", talk(t0.Add(72*time.Hour),
		user("Ann", "the weather is awful today"),
		mika("Rain all day, they say."),
		user("Ann", "what is my dog's name?"),
	)...)
	f.create("rei", "c", talk(t0,
		user("Ben", "my cat sleeps all day"),
		mika("Cats are experts at that."),
	)...)
	f.settle()
}

func TestFactRecalledInAnotherHistory(t *testing.T) {
	f := newFixture(t, Options{})
	dogHistories(f)

	b := f.recall(Query{ConfUID: "mika", HistoryUID: "b", Exclude: []int{1, 2}, Text: "what is my dog's name?"})
	if !has(b, dogFact) {
		t.Fatalf("the fact of history a was not recalled:\n%s", b.Text)
	}
	if !strings.Contains(b.Text, "Ann: "+dogFact) {
		t.Fatalf("the block does not read the fact as Ann's line:\n%s", b.Text)
	}
	for _, m := range b.Memories {
		if m.HistoryUID == "b" {
			t.Fatalf("recalled a turn the context holds: %+v", m)
		}
	}
	if b.Indexed != 9 {
		t.Fatalf("Indexed = %d, want the 9 messages of mika", b.Indexed)
	}
	st, err := f.svc.Stats(ctxT(t), "mika")
	if err != nil || st.Memories != 9 || st.Histories != 2 || st.WithVectors != 0 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}

	other := f.recall(Query{ConfUID: "rei", Text: "what is my dog's name?"})
	if has(other, dogFact) || strings.Contains(other.Text, "Biscuit") {
		t.Fatalf("another character recalls mika's memories:\n%s", other.Text)
	}
	if other.Indexed != 2 {
		t.Fatalf("rei's Indexed = %d, want 2", other.Indexed)
	}
	// A character with no history at all answers with nothing.
	if b := f.recall(Query{ConfUID: "nobody", Text: "what is my dog's name?"}); b.Text != "" || len(b.Memories) != 0 || b.Indexed != 0 {
		t.Fatalf("an unknown character recalls %+v", b)
	}
}

func TestNothingToRecall(t *testing.T) {
	f := newFixture(t, Options{})
	dogHistories(f)
	for _, q := range []Query{
		{ConfUID: "mika", Text: "quantum chromodynamics"},
		{ConfUID: "mika", Text: "   "},
		{ConfUID: "mika", Text: "dog", Budget: -1},
		{ConfUID: "mika", Text: "dog", Budget: 5}, // not even the intro fits
	} {
		b := f.recall(q)
		if b.Text != "" || len(b.Memories) != 0 || b.Tokens != 0 {
			t.Errorf("Recall(%q, budget %d) = %q, %d memories, %d tokens; want nothing", q.Text, q.Budget, b.Text, len(b.Memories), b.Tokens)
		}
		if b.Indexed != 9 {
			t.Errorf("Recall(%q).Indexed = %d", q.Text, b.Indexed)
		}
	}
}

func TestStemmedMatch(t *testing.T) {
	f := newFixture(t, Options{})
	f.create("mika", "a", talk(t0,
		user("Ann", "I love painting landscapes"),
		mika("Watercolours or oils?"),
	)...)
	f.create("mika", "b", talk(t0.Add(48*time.Hour),
		user("Ann", "my sister works at the bakery"),
		mika("Fresh bread every day!"),
	)...)
	f.settle()
	b := f.recall(Query{ConfUID: "mika", Text: "does she paint?"})
	if rankOf(b, "I love painting landscapes") != 1 {
		t.Fatalf("\"painting\" not found first by \"paint\":\n%s", b.Text)
	}
	if has(b, "my sister works at the bakery") {
		t.Fatalf("an unrelated message was recalled:\n%s", b.Text)
	}
}

// TestNamedPersonFirst has two people say the same thing; the one the
// question names comes first, whichever it is.
func TestNamedPersonFirst(t *testing.T) {
	f := newFixture(t, Options{})
	f.create("mika", "a", talk(t0, user("Caroline", "I went hiking in the hills last weekend"), mika("Sounds fun."))...)
	f.create("mika", "b", talk(t0.Add(48*time.Hour), user("Melanie", "I went hiking in the hills last weekend"), mika("Sounds fun."))...)
	f.settle()
	for _, c := range []struct{ q, want string }{
		{"When did Melanie go hiking?", "Melanie"},
		{"When did Caroline go hiking?", "Caroline"},
		{"when did melanie's family go hiking", "Melanie"},
	} {
		b := f.recall(Query{ConfUID: "mika", Text: c.q})
		var first Memory
		for _, m := range b.Memories {
			if m.Rank == 1 {
				first = m
			}
		}
		if first.Name != c.want {
			t.Errorf("%q: first is %q, want %s's message:\n%s", c.q, first.Name, c.want, b.Text)
		}
	}
}

// TestNeighbourComesAlong: the answer to a question holds none of its
// words, yet comes with it; what is further away in the session does not.
func TestNeighbourComesAlong(t *testing.T) {
	f := newFixture(t, Options{})
	f.create("mika", "a", talk(t0,
		user("Ann", "the kids were loud all afternoon"),
		mika("Children have so much energy."),
		user("Ann", "we finally bought a sofa"),
		mika("What colour is it?"),
		user("Ann", "Do you know what I cooked for the party?"),
		mika("Mushroom risotto with lots of parmesan!"),
		user("Ann", "yes, and everybody loved it"),
		mika("I am glad it went well."),
		user("Ann", "tomorrow I go back to the gym"),
	)...)
	f.create("mika", "b", talk(t0.Add(50*time.Hour), user("Ann", "the train was late again"), mika("Oh no."))...)
	f.settle()
	b := f.recall(Query{ConfUID: "mika", Text: "what did she cook for the party?"})
	if !has(b, "Do you know what I cooked for the party?") || !has(b, "Mushroom risotto with lots of parmesan!") {
		t.Fatalf("the question and its answer are not both recalled:\n%s", b.Text)
	}
	for _, far := range []string{"the kids were loud all afternoon", "Children have so much energy.", "tomorrow I go back to the gym", "the train was late again"} {
		if has(b, far) {
			t.Errorf("%q came along, though neither it nor a neighbour matches:\n%s", far, b.Text)
		}
	}
	// The answer ranks before a message further from the question.
	if ra, rf := rankOf(b, "Mushroom risotto with lots of parmesan!"), rankOf(b, "I am glad it went well."); rf != 0 && ra > rf {
		t.Fatalf("the next message (rank %d) ranks below one three away (rank %d)", ra, rf)
	}
}

// TestExclude: the turns a conversation holds word for word do not come
// back in it; the same turn numbers of another history do, and so do its
// own other turns.
func TestExclude(t *testing.T) {
	f := newFixture(t, Options{})
	guitar := func(uid string, n int) []koe.Record {
		var lines []say
		for i := 1; i <= n; i++ {
			lines = append(lines, user("Ann", fmt.Sprintf("guitar lesson %d in %s", i, uid)), mika(fmt.Sprintf("how was guitar lesson %d?", i)))
		}
		return talk(t0, lines...)
	}
	f.create("mika", "a", guitar("a", 4)...)
	f.create("mika", "b", guitar("b", 4)...)
	f.settle()

	b := f.recall(Query{ConfUID: "mika", HistoryUID: "a", Exclude: []int{1, 2, 4}, Text: "the guitar lessons", Budget: 4000})
	seen := map[string]bool{}
	for _, m := range b.Memories {
		if m.HistoryUID == "a" && m.Turn != 3 {
			t.Errorf("excluded turn %d of a recalled: %q", m.Turn, m.Text)
		}
		seen[fmt.Sprintf("%s/%d", m.HistoryUID, m.Turn)] = true
	}
	for _, want := range []string{"a/3", "b/1", "b/2", "b/4"} {
		if !seen[want] {
			t.Errorf("turn %s not recalled:\n%s", want, b.Text)
		}
	}
	// Without a history, Exclude means nothing.
	b = f.recall(Query{ConfUID: "mika", Exclude: []int{1, 2, 3, 4}, Text: "the guitar lessons", Budget: 4000})
	if len(b.Memories) != 16 {
		t.Fatalf("Exclude without HistoryUID dropped memories: %d of 16", len(b.Memories))
	}
}

var (
	headerLine = regexp.MustCompile(`^\[(Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([1-9]|[12][0-9]|3[01]) (January|February|March|April|May|June|July|August|September|October|November|December) (\d{4})\]$`)
	speechLine = regexp.MustCompile(`^[^:\n\[]+: \S.*$`)
)

// gardenHistories writes many sessions over several histories that all
// talk about the garden, some messages spanning lines.
func gardenHistories(f *fixture, conf string, histories, sessions int) {
	for h := range histories {
		uid := fmt.Sprintf("h%d", h)
		var recs []koe.Record
		for s := range sessions {
			start := t0.Add(time.Duration(h*sessions+s) * 30 * time.Hour)
			recs = append(recs, talk(start,
				user("Ann", fmt.Sprintf("the roses in my garden bloomed, session %d of %s", s, uid)),
				mika(fmt.Sprintf("Lovely! Which colour?\nTell me everything about garden %d.", s)),
				user("Ann", "red ones, and   the tulips are next\n\nwhich I planted in the autumn"),
				mika("Your garden will be a picture this spring."),
			)...)
		}
		f.create(conf, uid, recs...)
	}
	f.settle()
}

func TestBudget(t *testing.T) {
	tk := agent.NewTokenizer("")
	f := newFixture(t, Options{Count: tk.Count})
	gardenHistories(f, "mika", 3, 12)

	for _, question := range []string{"tell me about the garden and the tulips", "roses", "which colour were the roses in session 3?"} {
		budgets(t, f, tk.Count, question)
	}
}

// budgets asks question at budgets from 50 to 4000 tokens and checks
// each block's size and format.
func budgets(t *testing.T, f *fixture, count func(string) int, question string) {
	t.Helper()
	for _, budget := range []int{50, 60, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 4000} {
		b := f.recall(Query{ConfUID: "mika", Text: question, Budget: budget})
		exact := count(b.Text)
		if b.Tokens > budget || exact > budget {
			t.Errorf("budget %d: Tokens %d, text counts %d", budget, b.Tokens, exact)
		}
		if exact > b.Tokens {
			t.Errorf("budget %d: the block counts %d tokens, more than the %d it reports", budget, exact, b.Tokens)
		}
		if budget >= 100 && len(b.Memories) == 0 {
			t.Errorf("budget %d: nothing recalled", budget)
		}
		checkFormat(t, f, b)
	}
}

// checkFormat reads a block back line by line: the intro, a dated header
// for each session, then its messages as "Name: text", in time order.
func checkFormat(t *testing.T, f *fixture, b Block) {
	t.Helper()
	if len(b.Memories) == 0 {
		if b.Text != "" {
			t.Errorf("no memories, yet the text is %q", b.Text)
		}
		return
	}
	lines := strings.Split(b.Text, "\n")
	if lines[0] != blockIntro {
		t.Fatalf("first line %q, want the intro", lines[0])
	}
	var last time.Time
	mem := 0
	headers := 0
	sessions := map[string]bool{}
	for _, l := range lines[1:] {
		if m := headerLine.FindStringSubmatch(l); m != nil {
			at, err := time.ParseInLocation(headerLayout, l[1:len(l)-1], time.Local)
			if err != nil {
				t.Fatalf("header %q: %v", l, err)
			}
			if at.Before(last) {
				t.Fatalf("header %q comes after a later one: the block is not chronological\n%s", l, b.Text)
			}
			last = at
			headers++
			continue
		}
		if !speechLine.MatchString(l) {
			t.Fatalf("line %q is neither a header nor \"Name: text\"\n%s", l, b.Text)
		}
		if headers == 0 {
			t.Fatalf("a message before any header:\n%s", b.Text)
		}
		if mem >= len(b.Memories) {
			t.Fatalf("more lines than memories:\n%s", b.Text)
		}
		m := b.Memories[mem]
		if want := m.Name + ": " + strings.Join(strings.Fields(m.Text), " "); l != want {
			t.Fatalf("line %q, want %q", l, want)
		}
		if day := m.Time.Format(headerLayout); day != last.Format(headerLayout) {
			// Headers date a session by its day.
			t.Fatalf("memory %q of the session of %s under the header of %s", m.Text, day, last.Format(headerLayout))
		}
		sessions[fmt.Sprintf("%s@%d", m.HistoryUID, m.Time.Unix())] = true
		mem++
	}
	if mem != len(b.Memories) {
		t.Fatalf("%d lines for %d memories", mem, len(b.Memories))
	}
	if headers != len(sessions) {
		t.Fatalf("%d headers for %d sessions:\n%s", headers, len(sessions), b.Text)
	}
	for i := 1; i < len(b.Memories); i++ {
		p, m := b.Memories[i-1], b.Memories[i]
		if m.Time.Before(p.Time) || (m.HistoryUID == p.HistoryUID && m.Seq <= p.Seq) {
			t.Fatalf("memories out of order: %+v before %+v", p, m)
		}
	}
}

// TestBlockFormat checks one small block exactly.
func TestBlockFormat(t *testing.T) {
	f := newFixture(t, Options{})
	f.create("mika", "a", talk(t0,
		user("Ann", "hello there"),
		mika("Hello!"),
		user("Ann", "I adopted a kitten\nher name is Miso"),
		mika("Miso! What a cute name for a kitten."),
	)...)
	second := time.Date(2025, 6, 1, 9, 5, 0, 0, time.Local)
	f.add("mika", "a", talk(second,
		user("", "the kitten broke a vase"),
		mika("Oh no, kittens!"),
	)...)
	f.settle()
	b := f.recall(Query{ConfUID: "mika", Text: "kitten"})
	want := blockIntro + "\n" +
		"[Thu 8 May 2025]\n" +
		"Ann: I adopted a kitten her name is Miso\n" +
		"Mika: Miso! What a cute name for a kitten.\n" +
		"[Sun 1 June 2025]\n" +
		"User: the kitten broke a vase\n" +
		"Mika: Oh no, kittens!"
	// "hello there" is the kitten line's neighbour: it may come along.
	got := strings.Replace(b.Text, "Ann: hello there\nMika: Hello!\n", "", 1)
	got = strings.Replace(got, "Mika: Hello!\n", "", 1)
	if got != want {
		t.Fatalf("block:\n%s\nwant:\n%s", b.Text, want)
	}
	if b.Memories[0].Role != koe.RoleHuman || b.Memories[len(b.Memories)-1].Role != koe.RoleAI {
		t.Fatalf("roles: %+v", b.Memories)
	}
}
