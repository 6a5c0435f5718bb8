package knowledge

import (
	"context"
	"strings"
	"testing"
	"time"

	"koe/testkit/fakellm"
)

// TestHybridRetrieval measures the local store on the manual's questions
// with embedding models of every quality against keywords alone: a model
// that knows nothing (a random vector per text) and one that answers one
// vector for everything must leave every question's passages exactly as
// keywords alone find them, and the auto router's decisions too; models
// with some sense of the text (the fake endpoint's hashed bag of words, a
// co-occurrence model learnt from the manual) must answer at least as many
// questions as keywords alone. The table is in the log (go test -v).
func TestHybridRetrieval(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the whole manual into several stores")
	}
	questions := loadManualQuestions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var corpus []string
	for _, p := range allPassages(t, evalService(t, NewMemoryIndex(), nil, nil), evalConf) {
		corpus = append(corpus, p.Heading+"\n"+p.Text)
	}
	learnt := newCooccurrence(corpus)

	budgets := []int{600, DefaultBudget, 2400}
	// outcome is what one store makes of the questions: for each budget
	// the passages read for each question, and the router's reads.
	type outcome struct {
		passages map[int][]string // by budget: per question, its passages' texts joined
		answered map[int]int
		routed   []bool // the auto router read something, per question and small-talk line
	}
	measure := func(t *testing.T, s *Service) outcome {
		o := outcome{passages: map[int][]string{}, answered: map[int]int{}}
		for _, budget := range budgets {
			for _, q := range questions {
				res, err := s.Read(ctx, Query{ConfUID: evalConf, Text: q.Question, InputBudget: evalInputBudget, Budget: budget, Mode: Always})
				if err != nil {
					t.Fatal(err)
				}
				var texts []string
				for _, p := range res.Passages {
					texts = append(texts, p.Text)
				}
				o.passages[budget] = append(o.passages[budget], strings.Join(texts, "\x00"))
				if answers(res.Passages, q) {
					o.answered[budget]++
				}
			}
		}
		lines := append([]string(nil), offTopic...)
		for _, q := range questions {
			lines = append(lines, q.Question)
		}
		for _, l := range lines {
			res, err := s.Read(ctx, Query{ConfUID: evalConf, Text: l, InputBudget: evalInputBudget, Mode: Auto})
			if err != nil {
				t.Fatal(err)
			}
			o.routed = append(o.routed, len(res.Passages) > 0)
		}
		return o
	}
	open := func(t *testing.T, emb Embedder) *Service {
		x, _, _ := openLocal(t)
		return evalService(t, x, emb, nil)
	}

	keywords := measure(t, open(t, nil))
	rows := []struct {
		name  string
		model func(string) []float32
		// same: the model is noise, and must change nothing at all.
		same bool
	}{
		{"unrelated", unrelatedVector, true},
		{"constant", constantVector, true},
		{"hashed-words", func(s string) []float32 { return fakellm.EmbeddingVector(s, fakellm.EmbeddingDim) }, false},
		{"cooccurrence", learnt.vector, false},
	}
	share := func(n int) float64 { return 100 * float64(n) / float64(len(questions)) }
	// routedShare is the share of the questions, and of small talk, the
	// auto router read passages for.
	routedShare := func(o outcome) (on, off float64) {
		for i, r := range o.routed {
			switch {
			case r && i < len(offTopic):
				off++
			case r:
				on++
			}
		}
		return 100 * on / float64(len(questions)), 100 * off / float64(len(offTopic))
	}
	t.Logf("%-22s %8s %8s %8s %16s %12s", "local store", "600", "1200", "2400", "router: on-topic", "small talk")
	on, off := routedShare(keywords)
	t.Logf("%-22s %7.1f%% %7.1f%% %7.1f%% %15.1f%% %11.1f%%", "keywords", share(keywords.answered[600]), share(keywords.answered[1200]), share(keywords.answered[2400]), on, off)
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			got := measure(t, open(t, serveEmbeddings(t, row.model)))
			on, off := routedShare(got)
			t.Logf("%-22s %7.1f%% %7.1f%% %7.1f%% %15.1f%% %11.1f%%", "keywords+"+row.name, share(got.answered[600]), share(got.answered[1200]), share(got.answered[2400]), on, off)
			if row.same {
				for _, budget := range budgets {
					for i, q := range questions {
						if got.passages[budget][i] != keywords.passages[budget][i] {
							t.Errorf("budget %d, %s (%q): the %s model changed the passages read", budget, q.ID, q.Question, row.name)
						}
					}
				}
				for i := range got.routed {
					if got.routed[i] != keywords.routed[i] {
						t.Errorf("line %d: the %s model changed the auto router's decision (%v, keywords alone %v)", i, row.name, got.routed[i], keywords.routed[i])
					}
				}
				return
			}
			for _, budget := range budgets {
				if got.answered[budget] < keywords.answered[budget] {
					t.Errorf("budget %d: %d questions answered with the %s model, %d by keywords alone", budget, got.answered[budget], row.name, keywords.answered[budget])
				}
			}
		})
	}
}
