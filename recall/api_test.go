package recall_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"koe"
	"koe/bolt"
	"koe/recall"
)

const conf = "koe_default"

// rig is a recall service over a real history database.
type rig struct {
	t     *testing.T
	store *bolt.Store
	path  string
	svc   *recall.Service
}

func newRig(t *testing.T) *rig {
	t.Helper()
	// A clock a minute apart per call: every record has its own time.
	var mu sync.Mutex
	now := time.Date(2025, 5, 6, 9, 0, 0, 0, time.Local)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Minute)
		return now
	}
	path := filepath.Join(t.TempDir(), "koe.db")
	store, err := bolt.Open(path, bolt.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, store: store, path: path}
	r.start()
	t.Cleanup(func() {
		r.svc.Close()
		_ = store.Close()
	})
	return r
}

func (r *rig) start() {
	r.svc = recall.New(recall.Options{Store: r.store})
}

// restart is koe starting again over the same database.
func (r *rig) restart() {
	r.svc.Close()
	r.start()
}

// say stores lines ("human: ..." or "ai: ...") in history uid, or in a
// new one (all at once) when uid is "", and tells recall, as conversation
// does.
func (r *rig) say(uid string, lines ...string) string {
	r.t.Helper()
	return say(r.t, r.store, r.svc, uid, lines...)
}

// lineStore is where say stores lines.
type lineStore interface {
	CreateWith(ctx context.Context, confUID, historyUID string, recs ...koe.Record) error
	Append(ctx context.Context, confUID, historyUID string, rec koe.Record) error
}

// say stores lines ("human: ..." or "ai: ...") in history uid of store,
// or in a new one (all at once) when uid is "", tells svc, as
// conversation does, and returns the uid.
func say(t testing.TB, store lineStore, svc *recall.Service, uid string, lines ...string) string {
	t.Helper()
	ctx := t.Context()
	var recs []koe.Record
	for _, l := range lines {
		role, text, _ := strings.Cut(l, ": ")
		recs = append(recs, koe.Record{Role: role, Content: text})
	}
	if uid == "" {
		uid = koe.NewHistoryUID(time.Now())
		if err := store.CreateWith(ctx, conf, uid, recs...); err != nil {
			t.Fatal(err)
		}
	} else {
		for _, rec := range recs {
			if err := store.Append(ctx, conf, uid, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	svc.Noted(conf, uid)
	return uid
}

func (r *rig) settle() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.svc.Settle(ctx); err != nil {
		r.t.Fatal(err)
	}
}

// recalled returns the texts recalled for q.
func (r *rig) recalled(q string) []string {
	r.t.Helper()
	b, err := r.svc.Recall(context.Background(), recall.Query{ConfUID: conf, Text: q, Budget: 1000})
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, m := range b.Memories {
		out = append(out, m.Text)
	}
	return out
}

func mentions(texts []string, word string) bool {
	for _, t := range texts {
		if strings.Contains(t, word) {
			return true
		}
	}
	return false
}

// TestNewestPages: a listing walks every memory once, newest first,
// whatever the page size; a bad cursor is refused.
func TestNewestPages(t *testing.T) {
	r := newRig(t)
	a := r.say("", "human: one", "ai: two", "human: three")
	r.say("", "human: four", "ai: five")
	r.say(a, "ai: six", "metadata: ")
	r.settle()
	ctx := context.Background()

	for _, limit := range []int{1, 2, 5, 6, 50} {
		var got []string
		before := ""
		for pages := 0; ; pages++ {
			if pages > 6 {
				t.Fatalf("limit %d: the listing does not end", limit)
			}
			p, err := r.svc.Newest(ctx, conf, before, limit)
			if err != nil {
				t.Fatal(err)
			}
			if p.Stats.Memories != 6 || len(p.Memories) > limit {
				t.Fatalf("limit %d: stats %+v, %d memories", limit, p.Stats, len(p.Memories))
			}
			for _, m := range p.Memories {
				got = append(got, m.Text)
			}
			if p.Next == "" {
				break
			}
			before = p.Next
		}
		if want := "six five four three two one"; strings.Join(got, " ") != want {
			t.Errorf("limit %d: listed %q, want %q", limit, strings.Join(got, " "), want)
		}
	}
	for _, bad := range []string{"x", "1.2", "a.2.h", "1.b.h", "1.2.../x"} {
		if _, err := r.svc.Newest(ctx, conf, bad, 10); !errors.Is(err, recall.ErrCursor) {
			t.Errorf("cursor %q: %v, want ErrCursor", bad, err)
		}
	}
}

// TestForgetConversation: a history's memories go for good (through a
// restart and a rebuild), the history and other histories' memories stay,
// and what is said in it afterwards is remembered.
func TestForgetConversation(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	a := r.say("", "human: My sister Ayaka keeps bees in Hokkaido.", "ai: How lovely, honey from the north!")
	b := r.say("", "human: Ayaka also paints foxes.", "ai: A talented sister.")
	r.settle()
	if got := r.recalled("Where does Ayaka keep bees?"); !mentions(got, "bees") {
		t.Fatalf("before forgetting, recalled %q", got)
	}

	n, err := r.svc.ForgetConversation(context.Background(), conf, a)
	if err != nil || n != 2 {
		t.Fatalf("ForgetConversation = %d, %v; want 2", n, err)
	}
	check := func(when string) {
		t.Helper()
		got := r.recalled("Where does Ayaka keep bees? honey")
		if mentions(got, "bees") || mentions(got, "honey") {
			t.Errorf("%s: the forgotten conversation is recalled: %q", when, got)
		}
		if !mentions(r.recalled("Ayaka paints"), "foxes") {
			t.Errorf("%s: the other history is no longer recalled", when)
		}
	}
	check("at once")
	if recs, err := r.store.Messages(ctx, conf, a); err != nil || len(recs) != 3 {
		t.Errorf("the history itself changed: %d records, %v", len(recs), err)
	}
	r.restart()
	check("after a restart")
	if err := r.svc.Rebuild(context.Background(), conf); err != nil {
		t.Fatal(err)
	}
	check("after a rebuild")

	r.say(a, "human: The bees swarmed today.")
	r.settle()
	if got := r.recalled("bees swarmed"); !mentions(got, "swarmed") || mentions(got, "Hokkaido") {
		t.Errorf("what is said after forgetting: recalled %q", got)
	}
	if n, err := r.svc.ForgetConversation(context.Background(), conf, "2025-01-01_00-00-00_00000000000000000000000000000000"); !errors.Is(err, koe.ErrNotFound) || n != 0 {
		t.Errorf("an unknown history: %d, %v", n, err)
	}
	_ = b
}

// TestForgetBeforeIndexed: messages the indexer has not reached when
// their conversation is forgotten are never indexed, whichever comes
// first.
func TestForgetBeforeIndexed(t *testing.T) {
	r := newRig(t)
	var lines []string
	for i := range 600 { // more than one batch of the indexer's
		lines = append(lines, fmt.Sprintf("human: quokka number %d", i))
	}
	uid := r.say("", lines...)
	// A fresh service: the history is indexed from the start, while it
	// is being forgotten.
	r.restart()
	n, err := r.svc.ForgetConversation(context.Background(), conf, uid)
	if err != nil {
		t.Fatal(err)
	}
	r.settle()
	if got := r.recalled("quokka"); len(got) > 0 {
		t.Fatalf("recalled %d forgotten messages (%d were indexed when forgotten): %q", len(got), n, got[0])
	}
	st, err := r.svc.Stats(context.Background(), conf)
	if err != nil || st.Memories != 0 {
		t.Errorf("stats %+v, %v; want no memories", st, err)
	}
}

// TestForgetEverything: every history of the character, and nothing of
// another character's.
func TestForgetEverything(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	r.say("", "human: I grow tomatoes.", "ai: Nice.")
	r.say("", "human: I play the cello.", "ai: Lovely.")
	other, err := r.store.Create(ctx, "mika")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.store.Append(ctx, "mika", other, koe.Record{Role: koe.RoleHuman, Content: "I grow tomatoes too."}); err != nil {
		t.Fatal(err)
	}
	r.svc.Noted("mika", other)
	r.settle()
	n, err := r.svc.ForgetEverything(context.Background(), conf)
	if err != nil || n != 4 {
		t.Fatalf("ForgetEverything = %d, %v; want 4", n, err)
	}
	if got := r.recalled("tomatoes cello"); len(got) != 0 {
		t.Errorf("recalled %q", got)
	}
	b, err := r.svc.Recall(context.Background(), recall.Query{ConfUID: "mika", Text: "tomatoes", Budget: 1000})
	if err != nil || len(b.Memories) != 1 {
		t.Errorf("another character's memories: %+v, %v", b.Memories, err)
	}
	r.restart()
	if got := r.recalled("tomatoes cello"); len(got) != 0 {
		t.Errorf("after a restart, recalled %q", got)
	}
}

// pausingStore holds the indexer right after it stored entries, until
// the test lets it go on: the moment a forget can slip in between.
type pausingStore struct {
	*bolt.Store
	once      sync.Once
	saved     chan struct{} // closed once the first entries are stored
	release   chan struct{} // the indexer goes on once closed
	forgotten chan struct{} // a forget reached the store
}

func (p *pausingStore) SaveRecall(ctx context.Context, confUID, historyUID string, from, mark koe.RecallMark, entries []koe.RecallEntry) ([]koe.RecallEntry, error) {
	out, err := p.Store.SaveRecall(ctx, confUID, historyUID, from, mark, entries)
	p.once.Do(func() {
		close(p.saved)
		<-p.release
	})
	return out, err
}

func (p *pausingStore) ForgetRecalls(ctx context.Context, confUID, historyUID string, seqs []uint64) (int, error) {
	n, err := p.Store.ForgetRecalls(ctx, confUID, historyUID, seqs)
	p.forgotten <- struct{}{}
	return n, err
}

// TestForgetWhileIndexing: entries the indexer stored just before they
// were forgotten, and adds to the index just after, are not recalled.
func TestForgetWhileIndexing(t *testing.T) {
	r := newRig(t)
	r.svc.Close()
	p := &pausingStore{Store: r.store, saved: make(chan struct{}), release: make(chan struct{}), forgotten: make(chan struct{}, 1)}
	r.svc = recall.New(recall.Options{Store: p})
	uid := r.say("", "human: The wombat lives under the porch.")
	hang := time.After(30 * time.Second)
	select {
	case <-p.saved:
	case <-hang:
		t.Fatal("the indexer never stored the entry")
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.svc.ForgetConversation(context.Background(), conf, uid)
		done <- err
	}()
	select {
	case <-p.forgotten:
	case <-hang:
		t.Fatal("the forget never reached the store")
	}
	close(p.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-hang:
		t.Fatal("ForgetConversation hangs")
	}
	r.settle()
	if got := r.recalled("wombat porch"); len(got) > 0 {
		t.Errorf("a forgotten memory is recalled: %q", got)
	}
}
