package koe_test

import (
	"errors"
	"math"
	"testing"

	"koe"
)

func TestSummaryValidate(t *testing.T) {
	good := koe.SummaryRecord{ThreadID: "h", Turns: []int{4, 5, 6}, TurnLength: 3, OriginalChars: 90, SummaryChars: 27, CompressionRate: 0.3, Summary: "s"}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good summary: %v", err)
	}
	// Validate is about the summary alone: the history it names is the
	// store's to check.
	other := good
	other.ThreadID = ""
	if err := other.Validate(); err != nil {
		t.Errorf("a summary without a thread id: %v", err)
	}
	with := func(f func(r *koe.SummaryRecord)) koe.SummaryRecord {
		r := good
		r.Turns = append([]int(nil), good.Turns...)
		f(&r)
		return r
	}
	for want, r := range map[string]koe.SummaryRecord{
		"summary: no turns: invalid record":                           with(func(r *koe.SummaryRecord) { r.Turns, r.TurnLength = nil, 0 }),
		"summary: turn_length 2, but 3 turns: invalid record":         with(func(r *koe.SummaryRecord) { r.TurnLength = 2 }),
		"summary: turn 0 is not 1-based: invalid record":              with(func(r *koe.SummaryRecord) { r.Turns = []int{0, 1, 2} }),
		"summary: turns 4 and 6 are not consecutive: invalid record":  with(func(r *koe.SummaryRecord) { r.Turns = []int{4, 6, 7} }),
		"summary: negative character count: invalid record":           with(func(r *koe.SummaryRecord) { r.SummaryChars = -1 }),
		"summary: compression rate NaN not in [0, 1]: invalid record": with(func(r *koe.SummaryRecord) { r.CompressionRate = math.NaN() }),
		"summary: compression rate 1.5 not in [0, 1]: invalid record": with(func(r *koe.SummaryRecord) { r.CompressionRate = 1.5 }),
	} {
		err := r.Validate()
		if !errors.Is(err, koe.ErrInvalidRecord) || err.Error() != want {
			t.Errorf("%+v: %v, want %s", r, err, want)
		}
	}
}
