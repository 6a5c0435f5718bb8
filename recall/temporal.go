package recall

import (
	"strconv"
	"strings"
	"time"
)

// A LoCoMo-style "When did Ana move?" is answered by a message that says
// when relative to the day it was said ("we moved last month") read with
// its session's date, which the block's header gives. The words of such a
// question name the event, not the time, so BM25 alone ranks the message
// that mentions the move without saying when as high as the one that
// does; Ranking.Temporal tips that balance. A question that names a month
// or a year ("What did Ana do in May 2023?") steers toward the sessions
// dated then.

// timeWords say when something happened. "May" and "March" are months
// only beside a number or a preposition (monthWord): otherwise "I may"
// would date every message.
var timeWords = map[string]bool{
	"yesterday": true, "today": true, "tonight": true, "tomorrow": true, "ago": true,
	"recently": true, "lately": true, "earlier": true, "weekend": true, "weekends": true,
	"week": true, "weeks": true, "month": true, "months": true, "year": true, "years": true,
	"monday": true, "tuesday": true, "wednesday": true, "thursday": true, "friday": true,
	"saturday": true, "sunday": true,
	"spring": true, "summer": true, "autumn": true, "fall": true, "winter": true,
}

// months by their lowercase English name.
var months = func() map[string]time.Month {
	m := map[string]time.Month{}
	for i := time.January; i <= time.December; i++ {
		m[strings.ToLower(i.String())] = i
	}
	return m
}()

// monthWord reports the month words[i] names, if it does.
func monthWord(words []string, i int) time.Month {
	m, ok := months[words[i]]
	if !ok {
		return 0
	}
	if words[i] != "may" && words[i] != "march" {
		return m
	}
	if i+1 < len(words) && yearOrDay(words[i+1]) || i > 0 && (yearOrDay(words[i-1]) || monthPrep[words[i-1]]) {
		return m
	}
	return 0
}

var monthPrep = map[string]bool{"in": true, "of": true, "last": true, "next": true, "this": true, "since": true, "early": true, "late": true, "mid": true}

// yearOrDay reports whether w is a number that dates: a day of the month
// or a year.
func yearOrDay(w string) bool {
	n, err := strconv.Atoi(w)
	return err == nil && (n >= 1 && n <= 31 || isYear(n))
}

func isYear(n int) bool { return n >= 1900 && n <= 2099 }

// saysWhen reports whether a message's words date something.
func saysWhen(words []string) bool {
	for i, w := range words {
		if timeWords[w] || monthWord(words, i) != 0 {
			return true
		}
		if n, err := strconv.Atoi(w); err == nil && isYear(n) {
			return true
		}
	}
	return false
}

// timeQuestion is what a question asks about time.
type timeQuestion struct {
	asked bool
	// month and year, if not zero, are named by the question.
	month time.Month
	year  int
}

// askedWhen reads a question's words: "when", "how long", "what year",
// "since", or a month or a year named.
func askedWhen(words []string) timeQuestion {
	var q timeQuestion
	for i, w := range words {
		next := ""
		if i+1 < len(words) {
			next = words[i+1]
		}
		switch {
		case w == "when" || w == "since":
			q.asked = true
		case w == "how" && (next == "long" || next == "often"):
			q.asked = true
		case (w == "what" || w == "which") && (next == "year" || next == "month" || next == "day" || next == "date" || next == "week" || next == "time"):
			q.asked = true
		}
		if m := monthWord(words, i); m != 0 {
			q.asked, q.month = true, m
		}
		if n, err := strconv.Atoi(w); err == nil && isYear(n) {
			q.asked, q.year = true, n
		}
	}
	return q
}

// matches reports whether a session that started at t is of the month or
// year the question names (false when it names neither).
func (q timeQuestion) matches(t time.Time) bool {
	if q.month == 0 && q.year == 0 {
		return false
	}
	return (q.month == 0 || t.Month() == q.month) && (q.year == 0 || t.Year() == q.year)
}
