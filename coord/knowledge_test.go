package coord

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"koe/testkit/redistest"
)

// newsLog records the news an instance is told, as "conf/doc".
type newsLog struct {
	t      testing.TB
	name   string
	mu     sync.Mutex
	got    []string
	change chan struct{}
}

func newNewsLog(t testing.TB, name string) *newsLog {
	return &newsLog{t: t, name: name, change: make(chan struct{})}
}

func (n *newsLog) changed(conf, docID string) {
	n.mu.Lock()
	n.got = append(n.got, conf+"/"+docID)
	close(n.change)
	n.change = make(chan struct{})
	n.mu.Unlock()
}

// waitFor waits until count pieces of news have come and returns them all.
func (n *newsLog) waitFor(count int) []string {
	n.t.Helper()
	deadline := time.After(hangGuard)
	for {
		n.mu.Lock()
		got, ch := slices.Clone(n.got), n.change
		n.mu.Unlock()
		if len(got) >= count {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			n.t.Fatalf("%s: %d pieces of news within %s, want %d: %q", n.name, len(got), hangGuard, count, got)
		}
	}
}

func knowledgeNews(t testing.TB, url, name string) (*KnowledgeNews, *logWatch) {
	t.Helper()
	w := newLogWatch(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	k, err := NewKnowledgeNews(ctx, testConfig(url), slog.New(w))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k, w
}

// admin is a plain client of srv, for what the tests do to Redis itself.
func admin(t testing.TB, srv *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Port)})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func announce(t testing.TB, k *KnowledgeNews, conf, docID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := k.Announce(ctx, conf, docID); err != nil {
		t.Fatal(err)
	}
}

// An instance's announcement reaches the others, not itself; after a lost
// connection each instance is told that anything may have changed, and
// announcements go on.
func TestKnowledgeNewsBetweenInstances(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := knowledgeNews(t, srv.URL(), "A")
	b, bLog := knowledgeNews(t, srv.URL(), "B")
	aNews, bNews := newNewsLog(t, "A"), newNewsLog(t, "B")
	a.Follow(aNews.changed)
	b.Follow(bNews.changed)

	announce(t, a, "c1", "doc-1")
	if got := bNews.waitFor(1); !slices.Equal(got, []string{"c1/doc-1"}) {
		t.Fatalf("B was told %q, want [c1/doc-1]", got)
	}
	// Published after A's own: A would have been told of its own first.
	announce(t, b, "c2", "")
	if got := aNews.waitFor(1); !slices.Equal(got, []string{"c2/"}) {
		t.Fatalf("A was told %q, want [c2/]", got)
	}

	// Both lose their subscriptions: what was published meanwhile is
	// lost, so each is told that anything may have changed.
	if err := admin(t, srv).ClientKillByFilter(context.Background(), "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	if got := bNews.waitFor(2); got[1] != "/" {
		t.Fatalf("B after its subscription was lost: %q, want [c1/doc-1 /]", got)
	}
	if got := aNews.waitFor(2); got[1] != "/" {
		t.Fatalf("A after its subscription was lost: %q, want [c2/ /]", got)
	}
	bLog.waitFor("knowledge: subscribed again to the other instances' changes; reading every knowledge base again", 1)
	announce(t, a, "c1", "doc-2")
	if got := bNews.waitFor(3); got[2] != "c1/doc-2" {
		t.Fatalf("B after it subscribed again: %q, want c1/doc-2 last", got)
	}
}

// News that comes before the service follows is not lost: Follow tells it
// that anything may have changed.
func TestKnowledgeNewsBeforeFollow(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := knowledgeNews(t, srv.URL(), "A")
	b, bLog := knowledgeNews(t, srv.URL(), "B")
	announce(t, a, "c1", "doc-1")
	bLog.waitFor("knowledge: news before the knowledge service follows it; it reads everything again when it does", 1)
	bNews := newNewsLog(t, "B")
	b.Follow(bNews.changed)
	if got := bNews.waitFor(1); !slices.Equal(got, []string{"/"}) {
		t.Fatalf("B was told %q, want [/]", got)
	}
	announce(t, a, "c1", "doc-2")
	if got := bNews.waitFor(2); got[1] != "c1/doc-2" {
		t.Fatalf("B was told %q, want c1/doc-2 last", got)
	}
}

// An announcement that fails (here Redis refuses this instance's PUBLISH)
// is made good when the instance connects again: the others, whose own
// connection never broke, are told that anything may have changed.
func TestKnowledgeNewsAfterAFailedAnnouncement(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	adm := admin(t, srv)
	if err := adm.Do(ctx, "ACL", "SETUSER", "writer", "on", "nopass", "~*", "&*", "+@all", "-publish").Err(); err != nil {
		t.Fatal(err)
	}
	a, aLog := knowledgeNews(t, fmt.Sprintf("redis://writer:x@127.0.0.1:%d", srv.Port), "A")
	b, _ := knowledgeNews(t, srv.URL(), "B")
	aNews, bNews := newNewsLog(t, "A"), newNewsLog(t, "B")
	a.Follow(aNews.changed)
	b.Follow(bNews.changed)

	if err := a.Announce(ctx, "c1", "doc-1"); err == nil {
		t.Fatal("an announcement Redis refused succeeded")
	}
	if err := adm.Do(ctx, "ACL", "SETUSER", "writer", "+publish").Err(); err != nil {
		t.Fatal(err)
	}
	// A's connections go; B's stay.
	if err := adm.ClientKillByFilter(ctx, "USER", "writer").Err(); err != nil {
		t.Fatal(err)
	}
	aLog.waitFor("news: told the other instances to read everything again, news of this instance having not reached them", 1)
	if got := bNews.waitFor(1); !slices.Equal(got, []string{"/"}) {
		t.Fatalf("B was told %q, want [/]", got)
	}
	if got := aNews.waitFor(1); !slices.Equal(got, []string{"/"}) {
		t.Fatalf("A was told %q, want [/] (its own subscription came back)", got)
	}
}
