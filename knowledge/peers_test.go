package knowledge_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"koe/coord"
	"koe/knowledge"
	"koe/postgres"
	"koe/testkit/logwatch"
	"koe/testkit/pgtest"
	"koe/testkit/redistest"
)

// hangGuard bounds every wait: reached, it means a hang, never slowness.
const hangGuard = 30 * time.Second

// logWatch lets a test wait for a log message.
type logWatch struct{ *logwatch.Handler }

func newLogWatch(t testing.TB, name string) *logWatch { return &logWatch{logwatch.New(t, name)} }

// waitFor waits until message has been logged n times in all.
func (w *logWatch) waitFor(message string, n int) { w.WaitFor(message, n) }

const readAgain = "knowledge: read again what another instance changed"

// instance is one koe instance's knowledge service: its own connection to
// the shared PostgreSQL store, its own index, its own connection to Redis
// (nil redisURL: none, an instance that tells nobody).
func instance(t *testing.T, name, dsn, redisURL, store string) (*knowledge.Service, *logWatch) {
	t.Helper()
	w := newLogWatch(t, name)
	log := slog.New(w)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var peers *coord.KnowledgeNews
	if redisURL != "" {
		cfg := coord.DefaultConfig()
		cfg.Backend, cfg.RedisURL, cfg.Wait = coord.Redis, redisURL, hangGuard
		var err error
		if peers, err = coord.NewKnowledgeNews(ctx, cfg, log); err != nil {
			t.Fatal(err)
		}
	}
	st, err := postgres.Open(ctx, dsn, postgres.Options{Timeout: hangGuard})
	if err != nil {
		t.Fatal(err)
	}
	var idx knowledge.Index = knowledge.NewMemoryIndex()
	if store == knowledge.StoreLocal {
		if idx, err = knowledge.OpenLocalIndex(ctx, st, log); err != nil {
			t.Fatal(err)
		}
	}
	opts := knowledge.Options{Config: knowledge.DefaultConfig(), Docs: st, Index: idx, Count: count, Logger: log}
	if peers != nil {
		opts.Peers = peers
	}
	s := knowledge.New(opts)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if peers != nil {
			_ = peers.Close()
		}
		_ = idx.Close()
		_ = st.Close()
	})
	return s, w
}

func add(t *testing.T, s *knowledge.Service, name, text string) {
	t.Helper()
	if _, err := s.Add(testCtx(t), conf, knowledge.Upload{Name: name, Mime: "text/markdown", Data: []byte(text)}, count, nil); err != nil {
		t.Fatalf("add %s: %v", name, err)
	}
}

// names lists s's documents of conf.
func names(t *testing.T, s *knowledge.Service) string {
	t.Helper()
	docs, err := s.List(testCtx(t), conf)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range docs {
		out = append(out, d.Name)
	}
	return strings.Join(out, " ")
}

// whole is the text of conf's knowledge base as a turn reads it whole.
func whole(t *testing.T, s *knowledge.Service) string {
	t.Helper()
	res, err := s.Read(testCtx(t), knowledge.Query{ConfUID: conf, Text: "what is there?", InputBudget: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Passages) > 0 && !res.Whole {
		t.Fatalf("the knowledge base was not read whole: %+v", res)
	}
	var out []string
	for _, p := range res.Passages {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n")
}

// found is what a search of the index finds for word.
func found(t *testing.T, s *knowledge.Service, word string) string {
	t.Helper()
	ps, err := s.Search(testCtx(t), conf, word, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		if strings.Contains(p.Text, word) {
			out = append(out, p.Name)
		}
	}
	return strings.Join(out, " ")
}

// Two instances share one PostgreSQL store and one Redis: what one adds,
// replaces or deletes, the other lists, reads whole and finds in its own
// index without a restart. A change that reached nobody (made by an
// instance without Redis) is read when the connection to Redis comes back.
func TestKnowledgeAcrossInstances(t *testing.T) {
	for _, store := range []string{knowledge.StoreMemory, knowledge.StoreLocal} {
		t.Run(store, func(t *testing.T) {
			dsn := pgtest.Schema(t)
			srv := redistest.Start(t)
			a, _ := instance(t, "A", dsn, srv.URL(), store)
			b, bLog := instance(t, "B", dsn, srv.URL(), store)
			refreshed := 0
			changedOnA := func(what string) {
				t.Helper()
				start := time.Now()
				refreshed++
				bLog.waitFor(readAgain, refreshed)
				t.Logf("B read again %s after %s", time.Since(start).Round(10*time.Microsecond), what)
			}

			// B caches the empty list and whole text first.
			if got := names(t, b); got != "" {
				t.Fatalf("B lists %q before anything was added", got)
			}
			if got := whole(t, b); got != "" {
				t.Fatalf("B reads %q before anything was added", got)
			}

			add(t, a, "rules.md", "# Rules\n\nThe channel mascot is a zephyr named Pim.\n")
			changedOnA("an add")
			if got := names(t, b); got != "rules.md" {
				t.Fatalf("B lists %q after A added rules.md", got)
			}
			if got := whole(t, b); !strings.Contains(got, "zephyr") {
				t.Fatalf("B reads %q after A added rules.md", got)
			}
			if got := found(t, b, "zephyr"); got != "rules.md" {
				t.Fatalf("B's index finds %q for zephyr after A added rules.md", got)
			}

			add(t, a, "rules.md", "# Rules\n\nThe channel mascot is now a quokka named Pim.\n")
			changedOnA("a replacement")
			if got := whole(t, b); !strings.Contains(got, "quokka") || strings.Contains(got, "zephyr") {
				t.Fatalf("B reads %q after A replaced rules.md", got)
			}
			if got := found(t, b, "quokka"); got != "rules.md" {
				t.Fatalf("B's index finds %q for quokka after A replaced rules.md", got)
			}
			if got := found(t, b, "zephyr"); got != "" {
				t.Fatalf("B's index still finds %q for zephyr after A replaced rules.md", got)
			}

			docs, err := a.List(testCtx(t), conf)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := a.Delete(testCtx(t), conf, docs[0].ID); err != nil || !ok {
				t.Fatalf("delete: %v, %v", ok, err)
			}
			changedOnA("a delete")
			if got := names(t, b); got != "" {
				t.Fatalf("B lists %q after A deleted rules.md", got)
			}
			if got := found(t, b, "quokka"); got != "" {
				t.Fatalf("B's index finds %q for quokka after A deleted rules.md", got)
			}

			// An instance that tells nobody adds a document: B cannot know.
			// When B's subscription comes back after a lost connection, it
			// reads everything again.
			c, _ := instance(t, "C", dsn, "", store)
			add(t, c, "lore.md", "# Lore\n\nThe castle stands on a glacier.\n")
			if got := names(t, b); got != "" {
				t.Fatalf("B lists %q though nobody told it (the test is wrong)", got)
			}
			adm := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
			defer adm.Close()
			if err := adm.ClientKillByFilter(testCtx(t), "TYPE", "pubsub").Err(); err != nil {
				t.Fatal(err)
			}
			changedOnA("a lost connection")
			if got := names(t, b); got != "lore.md" {
				t.Fatalf("B lists %q after its connection came back", got)
			}
			if got := found(t, b, "glacier"); got != "lore.md" {
				t.Fatalf("B's index finds %q for glacier after its connection came back", got)
			}
		})
	}
}
