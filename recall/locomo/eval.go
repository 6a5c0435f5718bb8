package locomo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"koe"
	"koe/bolt"
	"koe/recall"
)

// Options drive Run.
type Options struct {
	// Budgets are the block sizes tried, in tokens.
	Budgets []int
	// Dir holds the replay's database (a fresh one; the caller removes it).
	Dir string
	// Ranking, if set, replaces recall.DefaultRanking.
	Ranking *recall.Ranking
	// Embedder, if set, adds the vector ranking as a live koe with an
	// embeddings endpoint would.
	Embedder recall.Embedder
	// Count counts tokens (koe's default tokenizer).
	Count  func(string) int
	Logger *slog.Logger
}

// Report is the outcome of Run: one Result per budget.
type Report struct {
	Samples   int
	Messages  int
	Questions int
	Results   []Result
}

// Result is the share of questions whose evidence all reached the block at
// one budget.
type Result struct {
	Budget     int
	Questions  int
	Found      int
	ByCategory map[int]*Tally
	Tokens     int // summed over questions
	Latencies  []time.Duration
}

// Tally counts one category's questions.
type Tally struct{ Questions, Found int }

// Categories names LoCoMo's question categories.
var Categories = map[int]string{1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

// Run replays samples into a fresh store and asks every question at every
// budget.
func Run(ctx context.Context, samples []Sample, opts Options) (*Report, error) {
	r, err := Replay(ctx, samples, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Report(ctx, opts.Budgets, opts.Ranking)
}

// Report asks every sample's questions at each budget with rk (nil:
// recall.DefaultRanking).
func (r *Replayed) Report(ctx context.Context, budgets []int, rk *recall.Ranking) (*Report, error) {
	rep := &Report{Samples: len(r.Samples), Messages: r.Messages}
	for i := range r.Samples {
		res, err := r.Ask(ctx, i, budgets, rk)
		if err != nil {
			return nil, err
		}
		rep.add(res)
	}
	return rep, nil
}

// Replayed is samples replayed into a store and indexed, ready to be
// asked their questions any number of times (the leave-one-out search
// asks them once for every ranking it tries).
type Replayed struct {
	Samples  []Sample
	Messages int
	// perSample counts each sample's messages.
	perSample []int
	count     func(string) int
	store     *bolt.Store
	svc       *recall.Service
}

// Replay replays samples into a fresh store in opts.Dir, each as its own
// character, and waits until the recall index holds them all.
func Replay(ctx context.Context, samples []Sample, opts Options) (*Replayed, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var clock struct {
		sync.Mutex
		t time.Time
	}
	now := func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return clock.t
	}
	store, err := bolt.Open(filepath.Join(opts.Dir, "locomo.db"), bolt.Options{Now: now})
	if err != nil {
		return nil, err
	}
	svc := recall.New(recall.Options{Store: store, Embedder: opts.Embedder, Count: opts.Count, Logger: opts.Logger})
	r := &Replayed{Samples: samples, count: opts.Count, store: store, svc: svc}
	for _, s := range samples {
		conf := confOf(s)
		r.perSample = append(r.perSample, 0)
		for _, sess := range s.Sessions {
			clock.Lock()
			clock.t = sess.Date
			clock.Unlock()
			n, err := replay(ctx, store, conf, s, sess)
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("sample %s session %d: %w", s.ID, sess.Number, err)
			}
			r.Messages += n
			r.perSample[len(r.perSample)-1] += n
		}
	}
	for _, s := range samples {
		for _, uid := range histories(ctx, store, confOf(s)) {
			svc.Noted(confOf(s), uid)
		}
	}
	if err := svc.Settle(ctx); err != nil {
		r.Close()
		return nil, err
	}
	if opts.Embedder != nil {
		// Without a vector for every message the hybrid figures would be
		// keyword figures in part: an endpoint that failed says so here.
		for _, s := range samples {
			st, err := svc.Stats(ctx, confOf(s))
			if err != nil {
				r.Close()
				return nil, err
			}
			if st.WithVectors < st.Memories {
				r.Close()
				return nil, fmt.Errorf("sample %s: the embeddings endpoint gave vectors for %d of %d messages", s.ID, st.WithVectors, st.Memories)
			}
		}
	}
	return r, nil
}

func (r *Replayed) messagesOf(i int) int { return r.perSample[i] }

// Close stops the index and closes the store.
func (r *Replayed) Close() {
	r.svc.Close()
	r.store.Close()
}

// Ask asks sample i's questions (category 5 left out) at each budget with
// rk (nil: recall.DefaultRanking), one Result per budget.
func (r *Replayed) Ask(ctx context.Context, i int, budgets []int, rk *recall.Ranking) ([]Result, error) {
	s := r.Samples[i]
	out := make([]Result, 0, len(budgets))
	for _, b := range budgets {
		res := Result{Budget: b, ByCategory: map[int]*Tally{}}
		for _, q := range s.QA {
			if q.Category == Adversarial {
				continue
			}
			start := time.Now()
			blk, err := r.svc.Recall(ctx, recall.Query{ConfUID: confOf(s), Text: q.Question, Budget: b, Ranking: rk})
			res.Latencies = append(res.Latencies, time.Since(start))
			if err != nil {
				return nil, fmt.Errorf("sample %s: %q: %w", s.ID, q.Question, err)
			}
			t := res.ByCategory[q.Category]
			if t == nil {
				t = &Tally{}
				res.ByCategory[q.Category] = t
			}
			t.Questions++
			res.Questions++
			if r.count != nil && blk.Text != "" {
				// What the model would be sent, counted whole.
				res.Tokens += r.count(blk.Text)
			} else {
				res.Tokens += blk.Tokens
			}
			if covers(blk, q.Evidence) {
				t.Found++
				res.Found++
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// add sums one sample's results (one per budget, in the report's order)
// into the report.
func (r *Report) add(res []Result) {
	if len(r.Results) == 0 {
		for _, x := range res {
			r.Results = append(r.Results, Result{Budget: x.Budget, ByCategory: map[int]*Tally{}})
		}
	}
	for i, x := range res {
		sum := &r.Results[i]
		sum.Questions += x.Questions
		sum.Found += x.Found
		sum.Tokens += x.Tokens
		sum.Latencies = append(sum.Latencies, x.Latencies...)
		for c, t := range x.ByCategory {
			if sum.ByCategory[c] == nil {
				sum.ByCategory[c] = &Tally{}
			}
			sum.ByCategory[c].Questions += t.Questions
			sum.ByCategory[c].Found += t.Found
		}
	}
	if len(r.Results) > 0 {
		r.Questions = r.Results[0].Questions
	}
}

// confOf is a sample's character.
func confOf(s Sample) string {
	return "locomo_" + notInID.ReplaceAllString(s.ID, "_")
}

var notInID = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// replay stores one session as a history of the sample's character:
// speaker A is the human, speaker B the character, each message a second
// after the one before, its dia_id kept as metadata.
func replay(ctx context.Context, store *bolt.Store, conf string, s Sample, sess Session) (int, error) {
	uid := koe.NewHistoryUID(sess.Date)
	var recs []koe.Record
	for i, t := range sess.Turns {
		role := koe.RoleAI
		if t.Speaker == s.SpeakerA {
			role = koe.RoleHuman
		}
		recs = append(recs, koe.Record{
			Role: role, Name: t.Speaker, Content: t.Text,
			Timestamp: sess.Date.Add(time.Duration(i) * time.Second).Format(koe.TimestampLayout),
			Meta:      map[string]string{"dia_id": t.DiaID},
		})
	}
	if err := store.CreateWith(ctx, conf, uid, recs...); err != nil {
		return 0, err
	}
	return len(recs), nil
}

func histories(ctx context.Context, store *bolt.Store, conf string) []string {
	list, err := store.List(ctx, conf)
	if err != nil {
		return nil
	}
	out := make([]string, len(list))
	for i, h := range list {
		out[i] = h.UID
	}
	return out
}

// evidenceID matches one dia_id; the data sometimes joins several in one
// string.
var evidenceID = regexp.MustCompile(`D\d+:\d+`)

// covers reports whether every evidence message is in the block.
func covers(b recall.Block, evidence []string) bool {
	in := map[string]bool{}
	for _, m := range b.Memories {
		in[m.Meta["dia_id"]] = true
	}
	n := 0
	for _, ev := range evidence {
		for _, id := range evidenceID.FindAllString(ev, -1) {
			n++
			if !in[id] {
				return false
			}
		}
	}
	return n > 0
}

// Write prints the report as a table.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "LoCoMo recall: %d conversations, %d messages, %d questions (category 5 left out)\n", r.Samples, r.Messages, r.Questions)
	fmt.Fprintln(w, "Found: questions whose evidence messages all reached the memories block.")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cats := []int{1, 2, 3, 4}
	head := []string{"budget", "found"}
	for _, c := range cats {
		head = append(head, fmt.Sprintf("%d %s", c, Categories[c]))
	}
	head = append(head, "tokens/q", "p50", "p99")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, res := range r.Results {
		row := []string{fmt.Sprint(res.Budget), pct(res.Found, res.Questions)}
		for _, c := range cats {
			t := res.ByCategory[c]
			if t == nil {
				row = append(row, "-")
				continue
			}
			row = append(row, fmt.Sprintf("%s (%d)", pct(t.Found, t.Questions), t.Questions))
		}
		tokens := 0
		if res.Questions > 0 {
			tokens = res.Tokens / res.Questions
		}
		p50, p99 := percentile(res.Latencies, 0.50), percentile(res.Latencies, 0.99)
		row = append(row, fmt.Sprint(tokens), p50.Round(time.Microsecond).String(), p99.Round(time.Microsecond).String())
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
}

func pct(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// Share is the overall share found at a budget (-1: not measured).
func (r *Report) Share(budget int) float64 {
	for _, res := range r.Results {
		if res.Budget == budget && res.Questions > 0 {
			return float64(res.Found) / float64(res.Questions)
		}
	}
	return -1
}
