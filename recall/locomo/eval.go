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
	defer store.Close()
	svc := recall.New(recall.Options{Store: store, Embedder: opts.Embedder, Count: opts.Count, Logger: opts.Logger})
	defer svc.Close()

	rep := &Report{Samples: len(samples)}
	for _, s := range samples {
		conf := confOf(s)
		for _, sess := range s.Sessions {
			clock.Lock()
			clock.t = sess.Date
			clock.Unlock()
			n, err := replay(ctx, store, conf, s, sess)
			if err != nil {
				return nil, fmt.Errorf("sample %s session %d: %w", s.ID, sess.Number, err)
			}
			rep.Messages += n
		}
	}
	for _, s := range samples {
		for _, uid := range histories(ctx, store, confOf(s)) {
			svc.Noted(confOf(s), uid)
		}
	}
	if err := svc.Settle(ctx); err != nil {
		return nil, err
	}

	for _, b := range opts.Budgets {
		res := Result{Budget: b, ByCategory: map[int]*Tally{}}
		for _, s := range samples {
			for _, q := range s.QA {
				if q.Category == Adversarial {
					continue
				}
				start := time.Now()
				blk, err := svc.Recall(ctx, recall.Query{ConfUID: confOf(s), Text: q.Question, Budget: b, Ranking: opts.Ranking})
				res.Latencies = append(res.Latencies, time.Since(start))
				if err != nil {
					return nil, fmt.Errorf("sample %s: %q: %w", s.ID, q.Question, err)
				}
				found := covers(blk, q.Evidence)
				t := res.ByCategory[q.Category]
				if t == nil {
					t = &Tally{}
					res.ByCategory[q.Category] = t
				}
				t.Questions++
				res.Questions++
				if opts.Count != nil && blk.Text != "" {
					// What the model would be sent, counted whole.
					res.Tokens += opts.Count(blk.Text)
				} else {
					res.Tokens += blk.Tokens
				}
				if found {
					t.Found++
					res.Found++
				}
			}
		}
		rep.Questions = res.Questions
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
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
