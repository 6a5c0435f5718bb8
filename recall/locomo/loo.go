package locomo

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"koe/recall"
)

// Dim is one weight of recall.Ranking that the leave-one-out search
// chooses, with the values it tries.
type Dim struct {
	Name   string
	Values []float64
	Get    func(recall.Ranking) float64
	Set    func(*recall.Ranking, float64)
	// Idea marks a method that may be on or off (not a weight every
	// ranking has): LeaveOneOut measures it held out at each of its
	// values.
	Idea bool
}

// DefaultGrid is what `koe eval locomo -loo` searches: the window and
// its weights, the session view, the speaker boost, and the ideas of
// recall.Ranking (dates, feedback, spread across sessions, sessions by
// coverage, query stop words, speakers' names), each with its off value
// first.
func DefaultGrid() []Dim {
	return []Dim{
		{Name: "window", Values: []float64{1, 2, 3},
			Get: func(r recall.Ranking) float64 { return float64(r.Window) },
			Set: func(r *recall.Ranking, v float64) { r.Window = int(v) }},
		{Name: "near", Values: []float64{0.2, 0.4, 0.6, 1.0},
			Get: func(r recall.Ranking) float64 { return r.Near },
			Set: func(r *recall.Ranking, v float64) { r.Near = v }},
		{Name: "far", Values: []float64{0.1, 0.3, 0.5},
			Get: func(r recall.Ranking) float64 { return r.Far },
			Set: func(r *recall.Ranking, v float64) { r.Far = v }},
		{Name: "session", Values: []float64{0.1, 0.3, 0.5, 1.0},
			Get: func(r recall.Ranking) float64 { return r.Session },
			Set: func(r *recall.Ranking, v float64) { r.Session = v }},
		{Name: "named", Values: []float64{1, 1.4, 1.8, 2.5},
			Get: func(r recall.Ranking) float64 { return r.Named },
			Set: func(r *recall.Ranking, v float64) { r.Named = v }},
		{Name: "temporal", Values: []float64{0, 0.5, 1}, Idea: true,
			Get: func(r recall.Ranking) float64 { return r.Temporal },
			Set: func(r *recall.Ranking, v float64) { r.Temporal = v }},
		{Name: "feedback", Values: []float64{0, 0.2, 0.5}, Idea: true,
			Get: func(r recall.Ranking) float64 { return r.Feedback },
			Set: func(r *recall.Ranking, v float64) { r.Feedback = v }},
		{Name: "spread", Values: []float64{1, 0.8, 0.6}, Idea: true,
			Get: func(r recall.Ranking) float64 {
				if r.Spread == 0 {
					return 1
				}
				return r.Spread
			},
			Set: func(r *recall.Ranking, v float64) { r.Spread = v }},
		switchDim("coverage", func(r *recall.Ranking) *bool { return &r.Coverage }),
		switchDim("stops", func(r *recall.Ranking) *bool { return &r.QueryStops }),
		// The block size from which a speaker's name is not searched as a
		// word; 500 is always, at the budgets the evaluation asks.
		{Name: "speakers", Values: []float64{0, 500, 1000, 2000, 4000}, Idea: true,
			Get: func(r recall.Ranking) float64 { return float64(r.SpeakerFrom) },
			Set: func(r *recall.Ranking, v float64) { r.SpeakerFrom = int(v) }},
	}
}

// switchDim is an idea that is on or off, the field field returns.
func switchDim(name string, field func(*recall.Ranking) *bool) Dim {
	return Dim{Name: name, Values: []float64{0, 1}, Idea: true,
		Get: func(r recall.Ranking) float64 {
			if *field(&r) {
				return 1
			}
			return 0
		},
		Set: func(r *recall.Ranking, v float64) { *field(r) = v != 0 }}
}

// FormatRanking writes rk's values of the grid's weights, name=value.
func FormatRanking(grid []Dim, rk recall.Ranking) string {
	parts := make([]string, len(grid))
	for i, d := range grid {
		parts[i] = d.Name + "=" + strconv.FormatFloat(d.Get(rk), 'g', -1, 64)
	}
	return strings.Join(parts, " ")
}

// LOO is the outcome of LeaveOneOut.
type LOO struct {
	Grid  []Dim
	Folds []Fold
	// HeldOut sums every conversation's results under the weights chosen
	// without it: the figure to expect on conversations never seen.
	HeldOut *Report
	// Chosen is what the search chooses on all the conversations, and
	// Fitted its results on them: the figure the weights were chosen
	// for, an upper bound.
	Chosen recall.Ranking
	Fitted *Report
	// Ideas are the held-out figures with one idea pinned to each of its
	// values, the other weights chosen as before.
	Ideas []IdeaResult
}

// Fold is one conversation left out.
type Fold struct {
	HeldOut string // the sample's id
	Chosen  recall.Ranking
	// Trained is the chosen weights' results on the other conversations.
	Trained *Report
	Result  *Report
}

// IdeaResult is the held-out figure with one Dim pinned to Value.
type IdeaResult struct {
	Dim     string
	Value   float64
	HeldOut *Report
}

// search asks each (ranking, conversation) once, however many folds
// and ideas try it.
type search struct {
	ctx      context.Context
	r        *Replayed
	budgets  []int
	cache    map[cacheKey][]Result
	progress io.Writer
}

type cacheKey struct {
	rk     recall.Ranking
	sample int
}

func (s *search) results(rk recall.Ranking, i int) ([]Result, error) {
	k := cacheKey{rk, i}
	if res, ok := s.cache[k]; ok {
		return res, nil
	}
	res, err := s.r.Ask(s.ctx, i, s.budgets, &rk)
	if err != nil {
		return nil, err
	}
	s.cache[k] = res
	return res, nil
}

// report sums rk's results on the samples.
func (s *search) report(rk recall.Ranking, samples []int) (*Report, error) {
	rep := &Report{Samples: len(samples)}
	for _, i := range samples {
		res, err := s.results(rk, i)
		if err != nil {
			return nil, err
		}
		rep.add(res)
		rep.Messages += s.r.messagesOf(i)
	}
	return rep, nil
}

// score is what the search maximises: questions found, summed over the
// budgets, so that no one budget decides.
func (s *search) score(rk recall.Ranking, samples []int) (int, error) {
	rep, err := s.report(rk, samples)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, res := range rep.Results {
		n += res.Found
	}
	return n, nil
}

// searchPasses bounds the coordinate ascent; it stops sooner once a pass
// changes nothing.
const searchPasses = 3

// choose picks the weights for samples by coordinate ascent from start:
// each Dim in turn takes the value that finds most, the others held,
// until a pass changes nothing. A tie keeps the value held.
func (s *search) choose(grid []Dim, start recall.Ranking, samples []int) (recall.Ranking, error) {
	cur := start
	best, err := s.score(cur, samples)
	if err != nil {
		return cur, err
	}
	for range searchPasses {
		changed := false
		for _, d := range grid {
			for _, v := range d.Values {
				try := cur
				d.Set(&try, v)
				if try == cur {
					continue
				}
				n, err := s.score(try, samples)
				if err != nil {
					return cur, err
				}
				if n > best {
					cur, best, changed = try, n, true
				}
			}
		}
		if !changed {
			break
		}
	}
	return cur, nil
}

// leaveOneOut chooses the weights without each sample in turn and sums
// the results on the samples left out.
func (s *search) leaveOneOut(grid []Dim, start recall.Ranking) (*Report, []Fold, error) {
	n := len(s.r.Samples)
	held := &Report{Samples: n}
	var folds []Fold
	for out := range n {
		var train []int
		for i := range n {
			if i != out {
				train = append(train, i)
			}
		}
		rk, err := s.choose(grid, start, train)
		if err != nil {
			return nil, nil, err
		}
		trained, err := s.report(rk, train)
		if err != nil {
			return nil, nil, err
		}
		res, err := s.report(rk, []int{out})
		if err != nil {
			return nil, nil, err
		}
		held.add(res.Results)
		held.Messages += res.Messages
		s.say("left out %s: chose %s (%d rankings asked so far)", s.r.Samples[out].ID, FormatRanking(grid, rk), len(s.cache))
		folds = append(folds, Fold{HeldOut: s.r.Samples[out].ID, Chosen: rk, Trained: trained, Result: res})
	}
	return held, folds, nil
}

// LOOOptions drive LeaveOneOut.
type LOOOptions struct {
	Budgets []int
	Grid    []Dim
	// Start is where the search starts (and what a tie keeps).
	Start recall.Ranking
	// Progress, if set, gets a line per fold: the search asks thousands
	// of questions per ranking it tries.
	Progress io.Writer
}

// LeaveOneOut chooses the ranking's weights from the grid on all but one
// conversation and reports the one left out, for each conversation in
// turn; then chooses on all of them (Chosen, Fitted). Each idea of the
// grid is then measured held out at each of its values: every fold's
// chosen weights with the idea set to the value, reported on the
// conversation that fold left out (searching again for every value would
// take an hour on the dev conversations). It needs at least two
// conversations.
func LeaveOneOut(ctx context.Context, r *Replayed, opts LOOOptions) (*LOO, error) {
	if len(r.Samples) < 2 {
		return nil, fmt.Errorf("leave-one-out needs at least two conversations, got %d", len(r.Samples))
	}
	s := &search{ctx: ctx, r: r, budgets: opts.Budgets, cache: map[cacheKey][]Result{}, progress: opts.Progress}
	held, folds, err := s.leaveOneOut(opts.Grid, opts.Start)
	if err != nil {
		return nil, err
	}
	all := make([]int, len(r.Samples))
	for i := range all {
		all[i] = i
	}
	chosen, err := s.choose(opts.Grid, opts.Start, all)
	if err != nil {
		return nil, err
	}
	s.say("chose on all %d: %s", len(all), FormatRanking(opts.Grid, chosen))
	fitted, err := s.report(chosen, all)
	if err != nil {
		return nil, err
	}
	out := &LOO{Grid: opts.Grid, Folds: folds, HeldOut: held, Chosen: chosen, Fitted: fitted}
	for _, d := range opts.Grid {
		if !d.Idea {
			continue
		}
		for _, v := range d.Values {
			h := &Report{Samples: len(folds)}
			for i, f := range folds {
				pinned := f.Chosen
				d.Set(&pinned, v)
				res, err := s.results(pinned, i)
				if err != nil {
					return nil, err
				}
				h.add(res)
				h.Messages += r.messagesOf(i)
			}
			out.Ideas = append(out.Ideas, IdeaResult{Dim: d.Name, Value: v, HeldOut: h})
		}
	}
	return out, nil
}

// say writes a progress line, if asked to.
func (s *search) say(format string, args ...any) {
	if s.progress != nil {
		fmt.Fprintf(s.progress, format+"\n", args...)
	}
}

// Write prints the search: each fold's choice, the held-out and fitted
// tables, and each idea held out.
func (l *LOO) Write(w io.Writer) {
	fmt.Fprintf(w, "Leave-one-conversation-out over %d conversations: the weights are chosen on the others and reported on the one left out.\n", len(l.Folds))
	for _, f := range l.Folds {
		fmt.Fprintf(w, "  left out %s: chose %s\n", f.HeldOut, FormatRanking(l.Grid, f.Chosen))
		fmt.Fprintf(w, "    found on the others %s; on %s %s\n", shares(f.Trained), f.HeldOut, shares(f.Result))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "HELD OUT (each conversation under the weights chosen without it):")
	l.HeldOut.Write(w)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "FITTED (chosen on all %d and reported on them, an upper bound): %s\n", len(l.Folds), FormatRanking(l.Grid, l.Chosen))
	l.Fitted.Write(w)
	if len(l.Ideas) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Each idea at each value, held out (every fold's chosen weights with the idea set to it):")
	for _, x := range l.Ideas {
		fmt.Fprintf(w, "  %s=%s: %s\n", x.Dim, strconv.FormatFloat(x.Value, 'g', -1, 64), shares(x.HeldOut))
	}
}

// shares is a report's share found at each budget, on one line.
func shares(r *Report) string {
	parts := make([]string, len(r.Results))
	for i, res := range r.Results {
		parts[i] = fmt.Sprintf("%s at %d", pct(res.Found, res.Questions), res.Budget)
	}
	return strings.Join(parts, ", ")
}
