package scene

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"koe"
	"koe/protocol"
	"koe/testkit"
)

// The scene's loop on a cast of fakes: each line waits for the test to
// let it end, so the test decides when every line ends. What the lines
// are made of (turns, the round) is tested end to end in app.

type fakeChars map[string]string

func (f fakeChars) Character(conf string) (string, string, bool) {
	name, ok := f[conf]
	return conf, name, ok
}

// fakeCast records what it is asked; each Speak waits on its line's
// channel: the test sends the reply (or closes the scene).
type fakeCast struct {
	mu     sync.Mutex
	events []string // "hear NAME: TEXT" and "speak I"
	lines  chan fakeLine
	closed chan struct{}
	once   sync.Once
}

type fakeLine struct {
	i     int
	ctx   context.Context
	reply chan string
}

func newFakeCast() *fakeCast {
	return &fakeCast{lines: make(chan fakeLine), closed: make(chan struct{})}
}

func (c *fakeCast) log(s string) {
	c.mu.Lock()
	c.events = append(c.events, s)
	c.mu.Unlock()
}

func (c *fakeCast) Events() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.events...)
}

func (c *fakeCast) Hear(_ context.Context, l protocol.SceneLine) error {
	c.log("hear " + l.Speaker + ": " + l.Text)
	return nil
}

func (c *fakeCast) Speak(ctx context.Context, i int) (string, bool, error) {
	c.log(fmt.Sprintf("speak %d", i))
	l := fakeLine{i: i, ctx: ctx, reply: make(chan string, 1)}
	select {
	case c.lines <- l:
	case <-ctx.Done():
		return "", true, ctx.Err()
	}
	select {
	case r := <-l.reply:
		return r, false, nil
	case <-ctx.Done():
		return "heard part", true, ctx.Err()
	}
}

func (c *fakeCast) ClientUIDs() []string { return []string{"a", "b", "c"} }
func (c *fakeCast) RecordUID() string    { return "record" }
func (c *fakeCast) Close()               { c.once.Do(func() { close(c.closed) }) }

// next is the line being said; say ends it with text.
func (c *fakeCast) next(t *testing.T) fakeLine {
	t.Helper()
	select {
	case l := <-c.lines:
		return l
	case <-time.After(testkit.HangGuard):
		t.Fatal("no line began")
	}
	return fakeLine{}
}

type fakeStage struct{ casts chan *fakeCast }

func (s fakeStage) OpenCast(context.Context, CastOptions) (Cast, error) {
	c := newFakeCast()
	s.casts <- c
	return c, nil
}

// startCatsScene starts Mio and Rin on cats for up to 5 rounds.
func startCatsScene(t *testing.T) (*Service, protocol.SceneInfo, *fakeCast) {
	t.Helper()
	s, st := newTestService(t, nil)
	info, err := s.Start(t.Context(), protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "cats", MaxRounds: 5})
	if err != nil {
		t.Fatal(err)
	}
	return s, info, <-st.casts
}

func newTestService(t *testing.T, edit func(*Config)) (*Service, fakeStage) {
	cfg := DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st := fakeStage{casts: make(chan *fakeCast, 8)}
	s := New(Options{Config: cfg, Characters: fakeChars{"mio": "Mio", "rin": "Rin", "kai": "Kai"}, Stage: st, LiveChat: "mio"})
	t.Cleanup(s.Close)
	return s, st
}

func TestSceneRefusesWhatCannotWork(t *testing.T) {
	s, _ := newTestService(t, func(c *Config) {
		c.MaxCharacters = 2
		c.MaxRounds = 10
		c.MaxDuration = time.Hour
		c.MaxTopicChars = 20
	})
	for _, c := range []struct {
		req  protocol.SceneRequest
		kind koe.Kind
		says string
	}{
		{protocol.SceneRequest{Characters: []string{"mio"}, Topic: "cats"}, koe.Invalid, "two characters or more"},
		{protocol.SceneRequest{Characters: []string{"mio", "rin", "kai"}, Topic: "cats"}, koe.Invalid, "at most 2 characters (scenes.max_characters)"},
		{protocol.SceneRequest{Characters: []string{"mio", "nobody"}, Topic: "cats"}, koe.NotFound, `no character has conf_uid "nobody"`},
		{protocol.SceneRequest{Characters: []string{"mio", "mio"}, Topic: "cats"}, koe.Invalid, "twice"},
		{protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "  "}, koe.Invalid, `needs a "topic"`},
		{protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: strings.Repeat("x", 21)}, koe.Invalid, "scenes.max_topic_chars"},
		{protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "cats", MaxRounds: 11}, koe.Invalid, "at most 10 (scenes.max_rounds)"},
		{protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "cats", MaxRounds: -1}, koe.Invalid, "max_rounds must be 1 or more"},
		{protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "cats", Duration: "2h"}, koe.Invalid, "at most 1h0m0s (scenes.max_duration)"},
		{protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "cats", Duration: "soon"}, koe.Invalid, "write it as 90s"},
		{protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "cats", Duration: "10ms"}, koe.Invalid, "at least 1s"},
		{protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "cats", History: "../x"}, koe.Invalid, "not a valid history id"},
	} {
		_, err := s.Start(t.Context(), c.req)
		if err == nil || koe.ErrorKind(err) != c.kind || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v (%v), want %v saying %q", c.req, err, koe.ErrorKind(err), c.kind, c.says)
		}
	}
	if len(s.List().Scenes) != 0 {
		t.Errorf("refused scenes are listed: %+v", s.List())
	}
}

// A scene says its rounds in order, a line each, and ends by itself; a
// second scene past scenes.max_running is refused until it has.
func TestSceneRoundsInOrderThenEnds(t *testing.T) {
	s, st := newTestService(t, func(c *Config) { c.MaxRunning = 1 })
	info, err := s.Start(t.Context(), protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "cats or dogs", MaxRounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if info.State != protocol.SceneRunning || info.Characters[1].ClientUID != "b" || info.Characters[0].HistoryUID != "scene-"+info.ID {
		t.Fatalf("started: %+v", info)
	}
	cast := <-st.casts
	if _, err := s.Start(t.Context(), protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "x"}); koe.ErrorKind(err) != koe.Conflict || !strings.Contains(err.Error(), "scenes.max_running") {
		t.Fatalf("a second scene: %v, want a conflict naming scenes.max_running", err)
	}
	var order []int
	for n := range 4 {
		l := cast.next(t)
		order = append(order, l.i)
		if got, _ := s.Scene(info.ID); got.Speaking != []string{"mio", "rin"}[l.i] {
			t.Errorf("line %d: speaking %q", n, got.Speaking)
		}
		l.reply <- fmt.Sprintf("line %d", n)
	}
	<-cast.closed
	got := waitScene(t, s, info.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.SceneEnded })
	if fmt.Sprint(order) != "[0 1 0 1]" || got.Rounds != 2 || got.EndReason != protocol.SceneEndRounds {
		t.Fatalf("order %v, scene %+v", order, got)
	}
	var texts []string
	for _, l := range got.Lines {
		texts = append(texts, l.Speaker+"/"+l.Text)
	}
	if want := "[Streamer/cats or dogs Mio/line 0 Rin/line 1 Mio/line 2 Rin/line 3]"; fmt.Sprint(texts) != want {
		t.Errorf("lines %v, want %s", texts, want)
	}
	if _, err := s.Start(t.Context(), protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "again", MaxRounds: 1}); err != nil {
		t.Errorf("a scene after the first ended: %v", err)
	}
}

// Pause holds the scene after the line being said; resume goes on. Skip
// stops one line (kept as heard) and the next speaker goes on; stop ends
// the scene.
func TestScenePauseSkipStop(t *testing.T) {
	s, info, cast := startCatsScene(t)
	l := cast.next(t)
	if _, err := s.Pause(info.ID); err != nil {
		t.Fatal(err)
	}
	if in, _ := s.Scene(info.ID); in.State != protocol.SceneRunning || in.Speaking != "mio" {
		t.Errorf("paused mid-line: %+v, want the line still running", in)
	}
	l.reply <- "first"
	waitScene(t, s, info.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.ScenePaused && in.Speaking == "" })
	select {
	case l := <-cast.lines:
		t.Fatalf("line of %d began while paused", l.i)
	default:
	}
	if _, err := s.Resume(info.ID); err != nil {
		t.Fatal(err)
	}
	l = cast.next(t)
	if l.i != 1 {
		t.Fatalf("after resume, character %d speaks, want 1", l.i)
	}
	skipped, _, err := s.Skip(info.ID)
	if err != nil || !skipped {
		t.Fatalf("skip: %v %v", skipped, err)
	}
	l = cast.next(t)
	if l.i != 0 {
		t.Fatalf("after a skip, character %d speaks, want 0", l.i)
	}
	got, err := s.Stop(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != protocol.SceneEnded || got.EndReason != protocol.SceneEndStopped {
		t.Fatalf("stopped: %+v", got)
	}
	lines := got.Lines
	if len(lines) != 4 || !lines[2].Interrupted || lines[2].Text != "heard part" || !lines[3].Interrupted || lines[3].ConfUID != "mio" {
		t.Errorf("lines %+v, want the skipped and the stopped line kept as heard", lines)
	}
	if _, err := s.Resume(info.ID); koe.ErrorKind(err) != koe.Conflict {
		t.Errorf("resume an ended scene: %v, want a conflict", err)
	}
	if _, err := s.Stop("nope"); koe.ErrorKind(err) != koe.NotFound {
		t.Errorf("stop an unknown scene: %v", err)
	}
}

// Viewers' lines from the live chat of a character in the scene are heard
// before the next line, and the live chat gets that line back; a
// character in no scene keeps its own live turns.
func TestSceneTakesViewersLines(t *testing.T) {
	s, st := newTestService(t, nil)
	if taken, _, _ := s.Viewers(t.Context(), "mio", "<live_chat>x</live_chat>", []string{"ann"}); taken {
		t.Fatal("no scene runs, but one took the chat")
	}
	info, err := s.Start(t.Context(), protocol.SceneRequest{Characters: []string{"rin", "mio"}, Topic: "cats", MaxRounds: 5})
	if err != nil || !info.LiveChat {
		t.Fatalf("start: %+v %v, want the live chat taken", info, err)
	}
	cast := <-st.casts
	l := cast.next(t)
	type answer struct {
		taken bool
		reply string
		err   error
	}
	got := make(chan answer, 1)
	go func() {
		taken, reply, err := s.Viewers(t.Context(), "mio", `<live_chat>viewer ann says: "hi"</live_chat>`, []string{"ann"})
		got <- answer{taken, reply, err}
	}()
	sc, err := s.find(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the viewers' line waits for the next speaker", func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return len(sc.waiting) == 1
	})
	l.reply <- "rin's line"
	l = cast.next(t)
	if ev := cast.Events(); ev[len(ev)-2] != `hear viewers ann: <live_chat>viewer ann says: "hi"</live_chat>` || ev[len(ev)-1] != "speak 1" {
		t.Fatalf("events %q, want the viewers' line heard before mio's line", ev)
	}
	l.reply <- "hello ann"
	if a := <-got; !a.taken || a.reply != "hello ann" || a.err != nil {
		t.Fatalf("the live chat got %+v, want mio's answer", a)
	}
	if taken, _, _ := s.Viewers(t.Context(), "rin", "x", nil); taken {
		t.Error("the chat of a character that is not the live chat's went into the scene")
	}
	// The live chat's skip stops the scene's line being said.
	l = cast.next(t)
	if s.SkipLine("rin") {
		t.Error("a skip of another character's live chat stopped the scene's line")
	}
	if !s.SkipLine("mio") {
		t.Error("the live chat's skip did not stop the scene's line")
	}
	if next := cast.next(t); next.i != 1 || l.ctx.Err() == nil {
		t.Errorf("after the live chat's skip, character %d speaks (the skipped line's context: %v)", next.i, l.ctx.Err())
	}
	in, _ := s.Scene(info.ID)
	if v := in.Lines[2]; v.Kind != protocol.SceneLineViewers || v.Speaker != "viewers ann" || v.Round != 1 {
		t.Errorf("the viewers' line is kept as %+v", v)
	}
}

// A duration ends the scene before the first line past it; the line being
// said when the time is up is said to its end; paused time is not counted.
func TestSceneDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, st := newTestService(t, nil)
		info, err := s.Start(t.Context(), protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "cats", Duration: "1m"})
		if err != nil {
			t.Fatal(err)
		}
		if info.MaxRounds != DefaultConfig().MaxRounds {
			t.Errorf("a duration alone runs up to %d rounds, want scenes.max_rounds", info.MaxRounds)
		}
		cast := <-st.casts
		l := <-cast.lines
		time.Sleep(40 * time.Second)
		l.reply <- "one"
		l = <-cast.lines
		if _, err := s.Pause(info.ID); err != nil {
			t.Fatal(err)
		}
		l.reply <- "two"
		synctest.Wait()
		time.Sleep(10 * time.Minute) // paused: not counted
		if _, err := s.Resume(info.ID); err != nil {
			t.Fatal(err)
		}
		l = <-cast.lines
		time.Sleep(30 * time.Second) // the time is up while this line runs
		l.reply <- "three"
		<-cast.closed
		synctest.Wait()
		got, _ := s.Scene(info.ID)
		if got.EndReason != protocol.SceneEndDuration || len(got.Lines) != 4 || got.Lines[3].Text != "three" {
			t.Errorf("scene %+v, want three lines then the end of its time", got)
		}
	})
}

func waitScene(t *testing.T, s *Service, id string, ok func(protocol.SceneInfo) bool) protocol.SceneInfo {
	t.Helper()
	return testkit.Await(t, "scene "+id, func() (protocol.SceneInfo, bool) {
		in, err := s.Scene(id)
		if err != nil {
			t.Fatal(err)
		}
		return in, ok(in)
	})
}

// A scene that ends before a character was given the viewers' line hands
// it back: the live session answers it.
func TestSceneEndGivesViewersBack(t *testing.T) {
	s, info, cast := startCatsScene(t)
	cast.next(t)
	taken := make(chan bool, 1)
	go func() {
		ok, _, _ := s.Viewers(t.Context(), "mio", "<live_chat>x</live_chat>", []string{"ann"})
		taken <- ok
	}()
	sc, err := s.find(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the viewers' line waits", func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return len(sc.waiting) == 1
	})
	if _, err := s.Stop(info.ID); err != nil {
		t.Fatal(err)
	}
	if <-taken {
		t.Error("a scene that ended before hearing the viewers' line kept it")
	}
	for _, ev := range cast.Events() {
		if strings.HasPrefix(ev, "hear") {
			t.Errorf("the ended scene heard %q", ev)
		}
	}
}

// koe's drain before a restart lets the line being said end, begins no
// other and starts no scene; Close then ends the scene as a shutdown.
func TestSceneDrain(t *testing.T) {
	s, info, cast := startCatsScene(t)
	l := cast.next(t)
	drained := make(chan bool, 1)
	go func() { drained <- s.Drain(t.Context()) }()
	testkit.Eventually(t, "the drain holds the scene", func() bool {
		sc, _ := s.find(info.ID)
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return sc.held
	})
	select {
	case <-drained:
		t.Fatal("the drain ended while a line was being said")
	default:
	}
	if _, err := s.Start(t.Context(), protocol.SceneRequest{Characters: []string{"mio", "rin"}, Topic: "dogs"}); !errors.Is(err, koe.ErrRestarting) {
		t.Errorf("a scene started while draining: %v", err)
	}
	l.reply <- "the last line"
	if !<-drained {
		t.Error("the drain says no line was being said")
	}
	s.Close()
	if in, _ := s.Scene(info.ID); in.EndReason != protocol.SceneEndShutdown || len(in.Lines) != 2 {
		t.Errorf("after the drain and close: %+v", in)
	}
	if ev := cast.Events(); len(ev) != 1 {
		t.Errorf("the cast was asked %q, want the one line begun before the drain", ev)
	}
}
