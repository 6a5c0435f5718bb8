package recall

import (
	"fmt"
	"testing"
	"time"
)

// TestSpeakersAreWhoNotWhat: Mika greets Ann by name in four sessions;
// Ann tried fencing in one and kayaking in another, neither saying her
// own name. Asked what Ann has tried, with her name searched as a word
// the greetings take the small block's room and the kayaking is left
// out; with SpeakerFrom at or under the budget the kayaking comes and no
// greeting does. Above the budget it is off.
func TestSpeakersAreWhoNotWhat(t *testing.T) {
	f := newFixture(t, Options{})
	const greeting, fencing, kayaking = "Ann! Hi Ann, so good to see you again, Ann.", "I tried fencing at the club.", "Then I tried kayaking on the lake with my cousin last summer, all day long."
	for i := range 4 {
		f.create("mika", fmt.Sprintf("g%d", i), talk(t0.Add(time.Duration(i)*48*time.Hour), mika(greeting), user("Ann", "Hello Mika."), mika("I tried a new soup today."))...)
	}
	f.create("mika", "f", talk(t0.Add(10*24*time.Hour), user("Ann", fencing), mika("Nice."))...)
	f.create("mika", "k", talk(t0.Add(12*24*time.Hour), user("Ann", kayaking), mika("Fun."))...)
	f.settle()
	const budget = 110
	q := Query{ConfUID: "mika", Text: "What has Ann tried?", Budget: budget}
	for _, c := range []struct {
		from int
		on   bool
	}{{0, false}, {budget, true}, {budget / 2, true}, {budget + 1, false}} {
		q.Ranking = with(func(r *Ranking) { r.SpeakerFrom = c.from })
		b := f.recall(q)
		t.Logf("from %d:\n%s", c.from, b.Text)
		if !has(b, fencing) {
			t.Errorf("SpeakerFrom %d: the fencing is missing:\n%s", c.from, b.Text)
		}
		if has(b, kayaking) != c.on || has(b, greeting) == c.on {
			t.Errorf("SpeakerFrom %d at %d tokens: want the kayaking %v and a greeting %v:\n%s", c.from, budget, c.on, !c.on, b.Text)
		}
	}
}

// TestWithoutSpeakers: a question that is only a name keeps it.
func TestWithoutSpeakers(t *testing.T) {
	named := map[string]bool{"caroline": true}
	if got := withoutSpeakers([]string{"carolin", "paint"}, named); len(got) != 1 || got[0] != "paint" {
		t.Errorf("got %q", got)
	}
	if got := withoutSpeakers([]string{"carolin"}, named); len(got) != 1 {
		t.Errorf("a name alone: got %q", got)
	}
}
