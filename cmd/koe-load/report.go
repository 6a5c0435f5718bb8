package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// figure is one row of the summary: how to read it from a measurement.
type figure struct {
	name   string
	format string // for one value, in the row's unit
	unit   string
	value  func(*measurement) float64 // NaN: not measured
}

func figures() []figure {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	dist := func(pick func(*measurement) []time.Duration, p float64) func(*measurement) float64 {
		return func(m *measurement) float64 {
			d := pick(m)
			if len(d) == 0 {
				return math.NaN()
			}
			return ms(quantile(d, p))
		}
	}
	first := func(m *measurement) []time.Duration { return m.first }
	total := func(m *measurement) []time.Duration { return m.total }
	turns := func(v func(*measurement) float64) func(*measurement) float64 {
		return func(m *measurement) float64 {
			if m.idleOnly || m.pid <= 0 {
				return math.NaN()
			}
			return v(m)
		}
	}
	proc := func(v func(*measurement) float64) func(*measurement) float64 {
		return func(m *measurement) float64 {
			if m.pid <= 0 {
				return math.NaN()
			}
			return v(m)
		}
	}
	return []figure{
		{"first audio p50", "%.1f", "ms", dist(first, 0.50)},
		{"first audio p99", "%.1f", "ms", dist(first, 0.99)},
		{"turn p50", "%.0f", "ms", dist(total, 0.50)},
		{"turn p99", "%.0f", "ms", dist(total, 0.99)},
		{"errors", "%.0f", "", func(m *measurement) float64 { return float64(m.errors()) }},
		{"CPU for the turns", "%.2f", "s", turns(func(m *measurement) float64 { return m.cpu.Seconds() })},
		{"RSS idle", "%.1f", "MiB", proc(func(m *measurement) float64 { return mib(m.idle.RSS) })},
		{"RSS per idle session", "%.1f", "KiB", proc(func(m *measurement) float64 {
			if m.open == 0 {
				return math.NaN()
			}
			return m.perSession()
		})},
		{"RSS after the turns", "%.1f", "MiB", turns(func(m *measurement) float64 { return mib(m.after.RSS) })},
	}
}

// summarise prints every figure over the runs, min–max: koe's, the
// floor's and koe / floor of each run.
func summarise(o options, runs []runResult) {
	mode := "text only"
	if o.koeConf != "" {
		mode = "koe config " + o.koeConf
	}
	if o.speech.on() {
		mode = o.speech.describe()
	}
	if o.tokens {
		mode += ", token frames"
	}
	fmt.Printf("summary: %d sessions, fake LLM at %.0f tokens/s, %s, %d run(s), min–max over the runs\n", o.n, o.tps, mode, len(runs))
	const row = "%-20s %-24s %-24s %-22s %s\n"
	if o.baseline {
		fmt.Printf(row, "", "koe", "floor", "koe / floor", "koe − floor")
	} else {
		fmt.Printf(row, "", "koe", "", "", "")
	}
	for _, f := range figures() {
		var koe, floor, ratio, gap []float64
		for _, r := range runs {
			k := f.value(r.koe)
			koe = appendValue(koe, k)
			if r.floor == nil {
				continue
			}
			fl := f.value(r.floor)
			floor = appendValue(floor, fl)
			gap = appendValue(gap, k-fl)
			if fl > 0 {
				ratio = appendValue(ratio, k/fl)
			}
		}
		cells := []string{withUnit(spread(koe, f.format), f.unit), "", "", ""}
		if o.baseline {
			cells[1] = withUnit(spread(floor, f.format), f.unit)
			cells[2] = spread(ratio, "%.2f")
			if len(ratio) > 0 {
				cells[2] += "×"
			}
			cells[3] = withUnit(spread(gap, f.format), f.unit)
		}
		fmt.Printf(row, f.name, cells[0], cells[1], cells[2], cells[3])
	}
	if o.baseline {
		var extra []float64
		for _, r := range runs {
			if r.koe.pid > 0 && r.floor.pid > 0 && r.koe.open > 0 {
				extra = append(extra, float64(r.koe.idle.RSS-r.floor.idle.RSS)/float64(r.koe.open))
			}
		}
		fmt.Printf(row, "(RSS idle gap) / N", withUnit(spread(extra, "%.1f"), "KiB (koe − floor, per session)"), "", "", "")
	}
}

func appendValue(to []float64, v float64) []float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return to
	}
	return append(to, v)
}

func withUnit(s, unit string) string {
	if s == "-" || unit == "" {
		return s
	}
	return s + " " + unit
}

// spread is "lo–hi" of v, or one value when they print the same; with
// three values or more, their median follows in brackets.
func spread(v []float64, format string) string {
	if len(v) == 0 {
		return "-"
	}
	a, b := fmt.Sprintf(format, slices.Min(v)), fmt.Sprintf(format, slices.Max(v))
	if a == b {
		return a
	}
	out := strings.Join([]string{a, b}, "–")
	if len(v) >= 3 {
		sorted := slices.Sorted(slices.Values(v))
		out += " (" + fmt.Sprintf(format, sorted[len(sorted)/2]) + ")"
	}
	return out
}
