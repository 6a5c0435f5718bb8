package knowledge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kumoAnswer is the sentence that answers both wordings of kumoQuestions.
const kumoAnswer = "It was bought in 1998 with a grant from the prefecture"

// kumoQuestions are the two wordings of the question: a long one,
// and a short one that held too few keywords for the router once vectors
// had put another chunk first.
var kumoQuestions = []string{
	"Which telescope does the Kumo Dome observatory use, and when was it bought?",
	"What telescope does Kumo Dome use?",
}

// observatoryService opens a service over a real bbolt file with idx and
// emb, holding the observatory's handbook and a bakery's notes, cut into
// small chunks so that the handbook is searched, never read whole.
func observatoryService(t *testing.T, idx Index, emb Embedder) *Service {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ChunkTokens, cfg.ChunkOverlap = 128, 0
	s := evalServiceWith(t, idx, emb, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"kumo-dome.md", "bakery.md"} {
		data, err := os.ReadFile(filepath.Join("testdata", "observatory", name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Add(ctx, evalConf, Upload{Name: name, Mime: "text/markdown", Data: data}, evalCount, nil); err != nil {
			t.Fatalf("add %s: %v", name, err)
		}
	}
	return s
}

// evalServiceWith opens an empty service over a real bbolt file with cfg.
func evalServiceWith(t *testing.T, idx Index, emb Embedder, cfg Config) *Service {
	t.Helper()
	st := openStore(t, filepath.Join(t.TempDir(), "koe.db"))
	s := New(Options{Config: cfg, Docs: st, Index: idx, Embedder: emb, Count: evalCount})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		_ = idx.Close()
		_ = st.Close()
	})
	return s
}

// kumoRead is what the auto router gives a turn for question at a budget
// of about five of the handbook's chunks, and where the answer lies in it
// (-1: not there).
func kumoRead(t *testing.T, s *Service, question string) (Result, int) {
	t.Helper()
	res, err := s.Read(context.Background(), Query{ConfUID: evalConf, Text: question, InputBudget: 400, Budget: 500, Mode: Auto})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Searched {
		t.Fatalf("%q was not searched: the documents must be too large to read whole", question)
	}
	for i, p := range res.Passages {
		if strings.Contains(normalizeSpace(p.Text), kumoAnswer) {
			return res, i
		}
	}
	return res, -1
}

// A clear keyword hit stays first, and the auto router reads it, whatever
// the embedding model: one that knows nothing, one that answers the same
// vector for everything, and one that only knows which document a text is
// about (every chunk of the handbook looks alike to it). The memory store,
// which ranks by keywords alone, answers the same.
func TestHybridKeepsKeywordHit(t *testing.T) {
	models := []struct {
		name  string
		model func(string) []float32
	}{
		{"unrelated", unrelatedVector},
		{"constant", constantVector},
		{"topic", topicVector("kumo")},
	}
	memory := observatoryService(t, NewMemoryIndex(), nil)
	for _, q := range kumoQuestions {
		res, at := kumoRead(t, memory, q)
		if at != 0 {
			t.Fatalf("memory store, %q: the answer is at %d of %d passages (match %.2f), want first", q, at, len(res.Passages), res.Match)
		}
	}
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			x, _, _ := openLocal(t)
			s := observatoryService(t, x, serveEmbeddings(t, m.model))
			for _, q := range kumoQuestions {
				res, at := kumoRead(t, s, q)
				if !res.Vectors {
					t.Fatalf("%q: vectors took no part: the test would prove nothing", q)
				}
				if len(res.Passages) == 0 {
					t.Errorf("%q: the auto router read nothing (match %.2f, %d keywords)", q, res.Match, res.Matched)
					continue
				}
				if at != 0 {
					var got []string
					for _, p := range res.Passages {
						got = append(got, p.Heading)
					}
					t.Errorf("%q: the answer is at %d of the passages read (%s), want first", q, at, strings.Join(got, " | "))
				}
			}
		})
	}
}
