package coord

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"koe/testkit/redistest"
)

func busInstance(t *testing.T, srv *redistest.Server, name string) (*Bus, chan string, chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	b, err := NewBus(ctx, testConfig(srv.URL()), slog.New(newLogWatch(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	got, resynced := make(chan string, 16), make(chan struct{}, 4)
	b.Handle("prompt", func(p string) { got <- "prompt " + p })
	b.Handle("doc", func(p string) { got <- "doc " + p })
	b.OnResync(func() { resynced <- struct{}{} })
	b.Start()
	t.Cleanup(func() { _ = b.Close() })
	return b, got, resynced
}

func nextNews(t *testing.T, ch chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(hangGuard):
		t.Fatalf("no news within %s", hangGuard)
	}
	return ""
}

// TestBusNews: news reaches the other instances' handlers of its topic,
// in order, and not its own; after a Redis restart every instance is
// told to read again what it may have missed, and news flows again.
func TestBusNews(t *testing.T) {
	srv := redistest.Start(t)
	a, aGot, aResync := busInstance(t, srv, "A")
	_, bGot, bResync := busInstance(t, srv, "B")
	ctx := context.Background()
	for _, n := range [][2]string{{"prompt", "mao\nsystem"}, {"other", "nobody listens"}, {"doc", "mao"}} {
		if err := a.Publish(ctx, n[0], n[1]); err != nil {
			t.Fatal(err)
		}
	}
	if got := nextNews(t, bGot); got != "prompt mao\nsystem" {
		t.Fatalf("B heard %q first", got)
	}
	if got := nextNews(t, bGot); got != "doc mao" {
		t.Fatalf("B heard %q second", got)
	}
	select {
	case s := <-aGot:
		t.Fatalf("A heard its own news %q", s)
	default:
	}
	if err := a.Publish(ctx, "bad\ntopic", ""); err == nil {
		t.Fatal("a topic with a newline was published")
	}

	srv.Stop()
	srv.Start()
	for _, ch := range []chan struct{}{aResync, bResync} {
		select {
		case <-ch:
		case <-time.After(hangGuard):
			t.Fatal("an instance was not told to resync after the Redis restart")
		}
	}
	if err := a.Publish(ctx, "doc", "after"); err != nil {
		t.Fatal(err)
	}
	if got := nextNews(t, bGot); got != "doc after" {
		t.Fatalf("after the restart B heard %q", got)
	}
}
