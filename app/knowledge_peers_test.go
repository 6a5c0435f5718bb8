package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/app"
	"koe/config"
	"koe/coord"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/pgtest"
	"koe/testkit/redistest"
)

// counter counts the log records of one message.
type counter struct {
	message string
	mu      sync.Mutex
	n       int
	change  chan struct{}
}

func (c *counter) see(message string) {
	if message != c.message {
		return
	}
	c.mu.Lock()
	c.n++
	close(c.change)
	c.change = make(chan struct{})
	c.mu.Unlock()
}

func (c *counter) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		c.mu.Lock()
		got, ch := c.n, c.change
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%q logged %d times within a minute, want %d", c.message, got, n)
		}
	}
}

// countLog passes records on to next, counting them.
type countLog struct {
	c    *counter
	next slog.Handler
}

func (h countLog) Enabled(context.Context, slog.Level) bool { return true }
func (h countLog) Handle(ctx context.Context, r slog.Record) error {
	h.c.see(r.Message)
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}
func (h countLog) WithAttrs(as []slog.Attr) slog.Handler {
	return countLog{c: h.c, next: h.next.WithAttrs(as)}
}
func (h countLog) WithGroup(g string) slog.Handler {
	return countLog{c: h.c, next: h.next.WithGroup(g)}
}

// Two koe instances on one PostgreSQL store and one Redis (coord: redis):
// a document added or deleted through one is listed, or not, by the other
// at once, though the other listed the documents before (and cached them).
func TestDocumentsAcrossInstances(t *testing.T) {
	dsn := pgtest.Schema(t)
	srv := redistest.Start(t)
	llm := koetest.StartLLM(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: fakellm.Words("Hi.")} })
	start := func(log slog.Handler) *app.Main {
		cfg := koetest.Config(t, t.TempDir(), llm.URL())
		cfg.Store, cfg.StoreDSN = config.StorePostgres, dsn
		cfg.Coord.Backend, cfg.Coord.RedisURL = coord.Redis, srv.URL()
		m := &app.Main{Config: cfg, Logger: slog.New(log), Getenv: func(string) string { return "" }}
		if err := m.Open(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	a := start(koetest.Logger(t).Handler())
	bLog := &counter{message: "knowledge: read again what another instance changed", change: make(chan struct{})}
	b := start(countLog{c: bLog, next: koetest.Logger(t).With("instance", "B").Handler()})
	client := &http.Client{Timeout: time.Minute} // a hang guard only
	const docs = "/api/characters/koe_default/documents"
	list := func(m *app.Main) string {
		t.Helper()
		resp, err := client.Get("http://" + m.Addr() + docs)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Documents []struct{ ID, Name string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("list: %s %v", resp.Status, err)
		}
		var names []string
		for _, d := range out.Documents {
			names = append(names, d.ID+":"+d.Name)
		}
		return strings.Join(names, " ")
	}

	if got := list(b); got != "" {
		t.Fatalf("B lists %q at first", got)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("file", "handbook.md")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = part.Write([]byte("# Handbook\n\nThe shared handbook says hello to every instance.\n"))
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post("http://"+a.Addr()+docs, mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload to A: %s %s", resp.Status, msg)
	}
	bLog.waitFor(t, 1)
	listed := list(b)
	if !strings.HasSuffix(listed, ":handbook.md") || listed != list(a) {
		t.Fatalf("B lists %q after the upload to A, A %q", listed, list(a))
	}

	id, _, _ := strings.Cut(listed, ":")
	req, err := http.NewRequest(http.MethodDelete, "http://"+a.Addr()+docs+"/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("delete on A: %s", resp.Status)
	}
	bLog.waitFor(t, 2)
	if got := list(b); got != "" {
		t.Fatalf("B lists %q after the delete on A", got)
	}
}
