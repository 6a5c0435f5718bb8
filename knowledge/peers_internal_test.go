package knowledge

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// heldPeers is the news between instances as the service sees it: the
// test plays the other instance by calling changed.
type heldPeers struct {
	mu      sync.Mutex
	changed func(conf, docID string)
}

func (p *heldPeers) Announce(context.Context, string, string) error { return nil }
func (p *heldPeers) Follow(changed func(conf, docID string)) {
	p.mu.Lock()
	p.changed = changed
	p.mu.Unlock()
}

// refreshLog records the service's "read again" log lines' attributes.
type refreshLog struct {
	mu     sync.Mutex
	lines  []map[string]string
	change chan struct{}
}

func (w *refreshLog) Enabled(context.Context, slog.Level) bool { return true }
func (w *refreshLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "knowledge: read again what another instance changed" {
		return nil
	}
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	w.mu.Lock()
	w.lines = append(w.lines, attrs)
	close(w.change)
	w.change = make(chan struct{})
	w.mu.Unlock()
	return nil
}
func (w *refreshLog) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *refreshLog) WithGroup(string) slog.Handler      { return w }

func (w *refreshLog) waitFor(t *testing.T, n int) map[string]string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		w.mu.Lock()
		lines, ch := w.lines, w.change
		w.mu.Unlock()
		if len(lines) >= n {
			return lines[n-1]
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d refreshes logged, want %d", len(lines), n)
		}
	}
}

// A document another instance changed while a change of it runs here is
// left to that change, then read again once it is done: the store may
// have changed under the read.
func TestRefreshWaitsForAChangeHere(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "koe.db"))
	t.Cleanup(func() { _ = st.Close() })
	peers := &heldPeers{}
	log := &refreshLog{change: make(chan struct{})}
	count := func(s string) int { return len(s)/4 + 1 }
	s := New(Options{Config: DefaultConfig(), Docs: st, Index: NewMemoryIndex(), Count: count, Peers: peers, Logger: slog.New(log)})
	t.Cleanup(s.Close)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := s.Add(ctx, "c1", Upload{Name: "rules.md", Data: []byte("# Rules\n\nThe mascot is a zephyr.\n")}, count, nil)
	if err != nil {
		t.Fatal(err)
	}
	find := func(word string) int {
		t.Helper()
		ps, err := s.Search(ctx, "c1", word, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(ps)
	}

	// Another instance replaces the document in the shared store.
	docs, err := st.KnowledgeDocs(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	replaced := docs[0]
	replaced.Added = replaced.Added.Add(time.Second)
	if err := st.PutKnowledgeDoc(ctx, "c1", replaced, "# Rules\n\nThe mascot is a quokka.\n", nil); err != nil {
		t.Fatal(err)
	}
	// A change of the same document runs here meanwhile.
	if !s.claim("c1", d.ID) {
		t.Fatal("the document is busy")
	}
	peers.changed("c1", d.ID)
	if got := log.waitFor(t, 1); got["documents"] != "0" || got["left_to_a_change_here"] != "1" {
		t.Fatalf("refresh during a change here: %v", got)
	}
	if find("quokka") != 0 || find("zephyr") != 1 {
		t.Fatal("the index changed under a change made here")
	}
	// A wake that was already pending may read it again, and leave it
	// again, before the release: the first refresh that puts a document
	// is the one after the release.
	s.release("c1", d.ID)
	for n := 2; ; n++ {
		got := log.waitFor(t, n)
		if got["documents"] == "0" && got["left_to_a_change_here"] == "1" {
			continue
		}
		if got["documents"] != "1" || got["left_to_a_change_here"] != "0" {
			t.Fatalf("refresh after the change here: %v", got)
		}
		break
	}
	if find("quokka") != 1 || find("zephyr") != 0 {
		t.Fatal("the index does not hold the other instance's document")
	}
}
