package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// table prints one row per result as soon as it is known.
type table struct{ header bool }

func newTable() *table { return &table{} }

const rowFormat = "%-10s %10s %10s %10s  %s\n"

func (t *table) row(name string, r result) {
	if !t.header {
		fmt.Printf(rowFormat, "scenario", "RSS before", "peak", "after", "outcome")
		t.header = true
	}
	text := r.text
	if r.err != nil {
		text = "FAILED: " + r.err.Error()
	}
	fmt.Printf(rowFormat, name, mib(r.before), mib(r.peak), mib(r.after), text)
	for _, n := range r.notes {
		fmt.Printf("%-10s %s\n", "", "note: "+n)
	}
}

// summarise gives the spread of several runs of each scenario.
func summarise(chosen []scenario, results [][]result) {
	fmt.Printf("over %d runs (min–max):\n", len(results[0]))
	fmt.Printf("%-10s %-18s %-18s %-18s %s\n", "scenario", "RSS before", "peak", "after", "figure")
	for i, s := range chosen {
		var before, peak, after, figure []float64
		missing := 0
		for _, r := range results[i] {
			before = appendKiB(before, r.before)
			peak = appendKiB(peak, r.peak)
			after = appendKiB(after, r.after)
			if math.IsNaN(r.value) || r.err != nil {
				missing++
				continue
			}
			figure = append(figure, r.value)
		}
		format := s.format
		if format == "" {
			format = "%.1f"
		}
		fig := spread(figure, format) + " " + s.figure
		if missing > 0 {
			fig += fmt.Sprintf(" (none in %d runs)", missing)
		}
		fmt.Printf("%-10s %-18s %-18s %-18s %s\n", s.name, spreadMiB(before), spreadMiB(peak), spreadMiB(after), fig)
	}
}

func appendKiB(to []float64, kib int64) []float64 {
	if kib <= 0 {
		return to
	}
	return append(to, float64(kib)/1024)
}

func spreadMiB(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return spread(v, "%.1f") + " MiB"
}

func spread(v []float64, format string) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := slices.Min(v), slices.Max(v)
	a, b := fmt.Sprintf(format, lo), fmt.Sprintf(format, hi)
	if a == b {
		return a
	}
	return strings.Join([]string{a, b}, "–")
}
