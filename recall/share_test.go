package recall_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"koe"
	"koe/coord"
	"koe/llm"
	"koe/postgres"
	"koe/recall"
	"koe/testkit/fakellm"
	"koe/testkit/logwatch"
	"koe/testkit/pgtest"
	"koe/testkit/redistest"
)

// Two koe instances on one PostgreSQL store and one Redis: each has its
// own connections, its own recall service with its index in memory, its
// own embeddings endpoint, and its own news bus.

// Log messages the tests wait for.
const (
	logApplied  = "recall: changes of another instance applied"
	logResynced = "recall: read again what other instances changed while news may have been lost"
	logRaced    = "recall: another instance indexed the history first; going on from its mark"
	logIgnored  = "recall: ignored malformed news from another instance"
)

// timedStore notes when each history's entries were last saved.
type timedStore struct {
	*postgres.Store
	mu    sync.Mutex
	saved map[string]time.Time

	// onSince, if set, runs before each read of records to index.
	onSince func(uid string)
}

func (s *timedStore) SaveRecall(ctx context.Context, conf, uid string, from, mark koe.RecallMark, entries []koe.RecallEntry) ([]koe.RecallEntry, error) {
	out, err := s.Store.SaveRecall(ctx, conf, uid, from, mark, entries)
	if err == nil && len(out) > 0 {
		s.mu.Lock()
		s.saved[uid] = time.Now()
		s.mu.Unlock()
	}
	return out, err
}

func (s *timedStore) savedAt(uid string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved[uid]
}

func (s *timedStore) Since(ctx context.Context, conf, uid string, after uint64, limit int) ([]koe.Record, error) {
	if s.onSince != nil {
		s.onSince(uid)
	}
	return s.Store.Since(ctx, conf, uid, after, limit)
}

type instance struct {
	t     *testing.T
	name  string
	store *timedStore
	svc   *recall.Service
	bus   *coord.Bus
	log   *logwatch.Handler
	embed *fakellm.Server
}

// startInstance starts one instance's recall over the store at dsn,
// sharing news through redis (none if redis is nil). onSince, if set,
// hooks the instance's reads of records to index.
func startInstance(t *testing.T, name, dsn string, redis *redistest.Server, onSince func(uid string)) *instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	embed, err := fakellm.Start("127.0.0.1:0", fakellm.Echo(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = embed.Close() })
	in := &instance{t: t, name: name, store: &timedStore{Store: pg, saved: map[string]time.Time{}, onSince: onSince},
		log: logwatch.New(t, name), embed: embed}
	in.svc = recall.New(recall.Options{
		Store:    in.store,
		Embedder: llm.NewEmbedder(llm.EmbeddingsConfig{BaseURL: embed.URL(), Model: "fake-embed"}, nil),
		// The default bounds a live turn's question; on a loaded test
		// machine a query vector may take longer, which is not tested here.
		QueryTimeout: time.Minute,
		Logger:       in.log.Logger(),
	})
	t.Cleanup(in.svc.Close)
	if redis != nil {
		c := coord.DefaultConfig()
		c.Backend, c.RedisURL = coord.Redis, redis.URL()
		in.bus, err = coord.NewBus(ctx, c, in.log.Logger())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = in.bus.Close() })
		in.svc.Share(in.bus)
		in.bus.Start()
		in.svc.Resync()
	}
	return in
}

// say stores lines ("human: ..." or "ai: ...") in history uid (a new one
// when uid is "") through this instance and tells its recall, as its
// sessions do; it returns the uid.
func (in *instance) say(uid string, lines ...string) string {
	in.t.Helper()
	return say(in.t, in.store, in.svc, uid, lines...)
}

func (in *instance) settle() {
	in.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := in.svc.Settle(ctx); err != nil {
		in.t.Fatal(err)
	}
}

// recalled is what the instance recalls for q.
func (in *instance) recalled(q string) recall.Block {
	in.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := in.svc.Recall(ctx, recall.Query{ConfUID: conf, Text: q, Budget: 1000})
	if err != nil {
		in.t.Fatal(err)
	}
	return b
}

func (in *instance) stats() recall.Stats {
	in.t.Helper()
	st, err := in.svc.Stats(context.Background(), conf)
	if err != nil {
		in.t.Fatal(err)
	}
	return st
}

// embedded reports whether the instance's embeddings endpoint was asked
// for text's vector.
func (in *instance) embedded(text string) bool {
	for _, r := range in.embed.EmbeddingRequests() {
		if slices.Contains(r.Input, text) {
			return true
		}
	}
	return false
}

// seqOf is the sequence number of the record of uid saying text.
func (in *instance) seqOf(uid, text string) uint64 {
	in.t.Helper()
	ctx := in.t.Context()
	msgs, err := in.store.Messages(ctx, conf, uid)
	if err != nil {
		in.t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Content == text {
			return m.Seq
		}
	}
	in.t.Fatalf("no record %q in %s", text, uid)
	return 0
}

func texts(b recall.Block) []string {
	var out []string
	for _, m := range b.Memories {
		out = append(out, m.Text)
	}
	return out
}

// TestInstancesShareMemories: what one instance indexes, forgets and
// deletes, the other recalls and stops recalling, with the first one's
// vectors (it embeds nothing again); after Redis restarts, the other
// catches up on what it missed meanwhile.
func TestInstancesShareMemories(t *testing.T) {
	dsn := pgtest.Schema(t)
	redis := redistest.Start(t)
	a := startInstance(t, "A", dsn, redis, nil)
	b := startInstance(t, "B", dsn, redis, nil)
	// B has the character loaded before A stores anything: only news
	// (or the store, read again) can tell it.
	if got := b.recalled("bees"); len(got.Memories) != 0 {
		t.Fatalf("B recalls %q from an empty store", texts(got))
	}
	// B's first subscription reads everything again, as every later one
	// does; done after A's first save, it would take that save in instead
	// of its news.
	b.log.WaitFor(logResynced, 1)
	// News that is not recall's is refused, not applied.
	ctx := context.Background()
	for _, bad := range []string{"", "saved", "saved\n" + conf, "saved\n../etc\nh1", "saved\n" + conf + "\n", "moved\n" + conf + "\nh1", "forgot\n" + conf + "\na/b"} {
		if err := a.bus.Publish(ctx, recall.NewsTopic, bad); err != nil {
			t.Fatal(err)
		}
	}
	b.log.WaitFor(logIgnored, 7)

	const bees = "My sister Alba keeps bees in Lugo."
	bee := a.say("", "human: "+bees, "ai: Bees in Galicia must love the rain.")
	a.settle()
	b.log.WaitFor(logApplied, 1)
	got := b.recalled("Where does Alba keep her bees?")
	if !slices.Contains(texts(got), bees) || !got.Vectors {
		t.Fatalf("B recalled %q (vectors %v), want %q ranked with vectors", texts(got), got.Vectors, bees)
	}
	if st := b.stats(); st != (recall.Stats{Memories: 2, Histories: 1, WithVectors: 2}) {
		t.Fatalf("B's index: %+v, want A's two memories with their vectors", st)
	}
	if b.embedded(bees) {
		t.Fatal("B embedded a message A had embedded already")
	}

	const cat = "Our cat is called Miso."
	miso := a.say("", "human: "+cat, "ai: Miso is a lovely name.")
	a.settle()
	b.log.WaitFor(logApplied, 2)
	if !slices.Contains(texts(b.recalled("what is the cat called")), cat) {
		t.Fatal("B does not recall the second history")
	}

	// Forgotten through A: one memory, then a whole conversation.
	if ok, err := a.svc.Forget(ctx, conf, bee, a.seqOf(bee, bees)); err != nil || !ok {
		t.Fatalf("Forget through A = %v, %v", ok, err)
	}
	b.log.WaitFor(logApplied, 3)
	if got := texts(b.recalled("Where does Alba keep her bees?")); slices.Contains(got, bees) {
		t.Fatalf("B still recalls a memory forgotten through A: %q", got)
	}
	if n, err := a.svc.ForgetConversation(ctx, conf, miso); err != nil || n != 2 {
		t.Fatalf("ForgetConversation through A = %d, %v", n, err)
	}
	b.log.WaitFor(logApplied, 4)
	if got := texts(b.recalled("what is the cat called Miso")); slices.Contains(got, cat) || slices.Contains(got, "Miso is a lovely name.") {
		t.Fatalf("B recalls a conversation forgotten through A: %q", got)
	}

	// A history deleted through A.
	const tea = "I drink genmaicha every morning."
	gone := a.say("", "human: "+tea)
	a.settle()
	b.log.WaitFor(logApplied, 5)
	if !slices.Contains(texts(b.recalled("genmaicha")), tea) {
		t.Fatal("B does not recall the third history")
	}
	if err := a.store.Delete(ctx, conf, gone); err != nil {
		t.Fatal(err)
	}
	a.svc.ForgetHistory(conf, gone)
	b.log.WaitFor(logApplied, 6)
	if got := texts(b.recalled("genmaicha")); slices.Contains(got, tea) {
		t.Fatalf("B recalls a history deleted through A: %q", got)
	}

	// Redis goes away: A's news is lost. When it is back, B reads again
	// what it missed.
	resynced := b.log.Count(logResynced)
	redis.Stop()
	const porto = "I moved to Porto last spring."
	a.say("", "human: "+porto)
	a.settle()
	if _, err := a.svc.Forget(ctx, conf, bee, a.seqOf(bee, "Bees in Galicia must love the rain.")); err != nil {
		t.Fatal(err)
	}
	if got := texts(b.recalled("Porto")); slices.Contains(got, porto) {
		t.Fatalf("B recalls %q before hearing of it", got)
	}
	redis.Start()
	b.log.WaitFor(logResynced, resynced+1)
	if !slices.Contains(texts(b.recalled("where did I move, Porto?")), porto) {
		t.Fatal("after Redis came back, B does not recall what A indexed meanwhile")
	}
	if got := texts(b.recalled("bees Galicia rain")); slices.Contains(got, "Bees in Galicia must love the rain.") {
		t.Fatalf("after Redis came back, B recalls what A forgot meanwhile: %q", got)
	}
	if st, sa := b.stats(), a.stats(); st != sa {
		t.Fatalf("B's index %+v, A's %+v", st, sa)
	}
	if b.embedded(porto) {
		t.Fatal("B embedded a message A had embedded already")
	}

	// Everything forgotten through A. B hears of it by the news, or, if A
	// was still telling everyone to read everything again after Redis came
	// back, by reading again: either way it logs when done.
	if n, err := a.svc.ForgetEverything(ctx, conf); err != nil || n != 1 {
		t.Fatalf("ForgetEverything through A = %d, %v; want the one memory left", n, err)
	}
	b.log.WaitUntil("B forgets what A forgot", func() bool { return b.stats().Memories == 0 })
}

// TestIndexerTakesWhatAnotherIndexed: without news (none shared), an
// instance whose session adds to a history another instance indexed takes
// that instance's entries before its own: its index has them all, once.
func TestIndexerTakesWhatAnotherIndexed(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Schema(t)
	a := startInstance(t, "A", dsn, nil, nil)
	b := startInstance(t, "B", dsn, nil, nil)
	if st := b.stats(); st.Memories != 0 {
		t.Fatalf("B starts with %+v", st)
	}
	uid := a.say("", "human: The boat is moored in Vigo.", "ai: A good harbour.")
	a.settle()
	// The conversation goes on through B.
	b.say(uid, "human: Its name is Gaivota.", "ai: A seagull, then.")
	b.settle()
	if st := b.stats(); st != (recall.Stats{Memories: 4, Histories: 1, WithVectors: 4}) {
		t.Fatalf("B's index: %+v, want all four memories, with vectors", st)
	}
	if got := texts(b.recalled("where is the boat moored")); !slices.Contains(got, "The boat is moored in Vigo.") {
		t.Fatalf("B recalls %q", got)
	}
	if b.embedded("The boat is moored in Vigo.") {
		t.Fatal("B embedded a message A had embedded already")
	}
	var n int
	if err := b.store.ForEachRecall(ctx, conf, func(koe.RecallEntry) error { n++; return nil }); err != nil || n != 4 {
		t.Fatalf("the store holds %d entries (%v), want 4", n, err)
	}
}

// TestInstancesIndexAtOnce: two instances that index one history at the
// same moment store its entries once; the one that comes second takes the
// other's entries and neither index holds a memory twice.
func TestInstancesIndexAtOnce(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Schema(t)
	redis := redistest.Start(t)
	// Both indexers read the history's records, then wait for each other:
	// they would save the same entries.
	var read sync.WaitGroup
	read.Add(2)
	var once [2]sync.Once
	hook := func(i int) func(string) {
		return func(string) {
			once[i].Do(func() {
				read.Done()
				read.Wait()
			})
		}
	}
	a := startInstance(t, "A", dsn, redis, hook(0))
	b := startInstance(t, "B", dsn, redis, hook(1))
	lines := []string{"human: Dinner is at eight on Friday.", "ai: I will remember.", "human: Bring the blue dish.", "ai: The blue one, yes."}
	uid := a.say("", lines...)
	b.svc.Noted(conf, uid) // as a session of B's would, at once
	a.settle()
	b.settle()
	if got := a.log.Count(logRaced) + b.log.Count(logRaced); got != 1 {
		t.Fatalf("%d indexers found the history indexed first, want exactly one", got)
	}
	for _, in := range []*instance{a, b} {
		if st := in.stats(); st != (recall.Stats{Memories: 4, Histories: 1, WithVectors: 4}) {
			t.Fatalf("%s's index: %+v, want each memory once, with its vector", in.name, st)
		}
	}
	var seqs []uint64
	if err := a.store.ForEachRecall(ctx, conf, func(e koe.RecallEntry) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 4 {
		t.Fatalf("the store holds entries %v, want 4", seqs)
	}
	if m, _, err := a.store.RecallMark(ctx, conf, uid); err != nil || m.Seq != seqs[3] || m.Turn != 2 {
		t.Fatalf("mark %+v, %v; want seq %d turn 2", m, err, seqs[3])
	}
}

// TestNewsLatency measures how long an entry saved by one instance takes
// to be in the other's index (the report's number); it asserts only that
// every one arrives.
func TestNewsLatency(t *testing.T) {
	dsn := pgtest.Schema(t)
	redis := redistest.Start(t)
	a := startInstance(t, "A", dsn, redis, nil)
	b := startInstance(t, "B", dsn, redis, nil)
	b.stats() // B has the character loaded
	const n = 100
	uid := a.say("", "human: Let us count.")
	a.settle()
	b.log.WaitFor(logApplied, 1)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		a.say(uid, "human: Fact number "+strings.Repeat("i", i+1)+".")
		b.log.WaitFor(logApplied, i+2)
		lat = append(lat, time.Since(a.store.savedAt(uid)))
	}
	if st := b.stats(); st.Memories != n+1 {
		t.Fatalf("B holds %d memories, want %d", st.Memories, n+1)
	}
	slices.Sort(lat)
	t.Logf("from A's save to B's index, over %d entries: median %s, p90 %s, max %s",
		n, lat[n/2].Round(10*time.Microsecond), lat[n*9/10].Round(10*time.Microsecond), lat[n-1].Round(10*time.Microsecond))
}

// failEmbeddings makes in's embeddings endpoint answer 503 while the
// returned flag is set.
func failEmbeddings(in *instance) *atomic.Bool {
	var fail atomic.Bool
	in.embed.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply {
		if fail.Load() {
			return fakellm.EmbeddingReply{Status: 503}
		}
		return fakellm.EmbeddingReply{}
	})
	return &fail
}

// asked counts the requests to in's embeddings endpoint that held text.
func (in *instance) asked(text string) int {
	n := 0
	for _, r := range in.embed.EmbeddingRequests() {
		if slices.Contains(r.Input, text) {
			n++
		}
	}
	return n
}

// TestBackfilledVectorsShared: vectors one instance made late for
// memories stored without (its endpoint was down) are the other's too:
// it takes them from the store rather than make them again.
func TestBackfilledVectorsShared(t *testing.T) {
	dsn := pgtest.Schema(t)
	a := startInstance(t, "A", dsn, nil, nil)
	b := startInstance(t, "B", dsn, nil, nil)
	aDown, bDown := failEmbeddings(a), failEmbeddings(b)
	aDown.Store(true)
	bDown.Store(true)
	const old = "The spare key is under the blue pot."
	a.say("", "human: "+old)
	a.settle()
	// B loads the memory without a vector, and cannot make one.
	if st := b.stats(); st != (recall.Stats{Memories: 1, Histories: 1}) {
		t.Fatalf("B's index: %+v", st)
	}
	b.settle()
	tried := b.asked(old)

	// A's endpoint answers again: its next message brings the old
	// memory its vector.
	aDown.Store(false)
	a.say("", "human: The plumber comes on Tuesday.")
	a.settle()
	if st := a.stats(); st.WithVectors != 2 {
		t.Fatalf("A's index: %+v, want both memories with vectors", st)
	}
	// B's too; its backfill finds A's vector in the store.
	bDown.Store(false)
	b.say("", "human: I lost my umbrella.")
	b.settle()
	if st := b.stats(); st.Memories != 2 || st.WithVectors != 2 {
		t.Fatalf("B's index: %+v, want its two memories with vectors", st)
	}
	if n := b.asked(old); n != tried {
		t.Fatalf("B asked its endpoint for a vector A had made (%d requests, %d before)", n, tried)
	}
}
