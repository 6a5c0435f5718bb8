package scene

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"koe"
	"koe/internal/quote"
	"koe/livechat"
	"koe/protocol"
)

// Characters find the characters a scene names.
type Characters interface {
	// Character returns the display name of the character with confUID
	// ("default": the configuration file's own) and its conf_uid.
	Character(confUID string) (conf, name string, ok bool)
}

// Stage opens a scene's cast (conversation's round over a headless
// session per character).
type Stage interface {
	OpenCast(ctx context.Context, opts CastOptions) (Cast, error)
}

// CastOptions say who talks in a scene, where each keeps it, and what
// about.
type CastOptions struct {
	Scene      string
	Characters []protocol.SceneCharacter
	Topic      string
	// Opening is the transcript's first line: the topic, said by the
	// streamer.
	Opening protocol.SceneLine
	// Rules end every character's system prompt in the scene: what a
	// scene is and, when it takes the live chat, how viewers' lines come.
	Rules string
}

// Rules of every scene, in each character's system prompt.
const Rules = `Scene: you are on a stream with other characters, talking with each other about a topic the streamer set, for the audience to enjoy. The others' lines reach you named by who said them. Say only your own next line, as yourself: one to three spoken sentences that answer or carry on what was just said; do not write the others' lines and do not put your name before yours.`

// Cast is a scene's characters, each in a headless session, taking turns
// on a shared transcript whose lines name their speakers (conversation's
// round).
type Cast interface {
	// Hear adds a line that no character said (viewers' messages) to the
	// transcript: each character is given it at its next line.
	Hear(ctx context.Context, line protocol.SceneLine) error
	// Speak has character i say its next line, given what was said since
	// its last one. It returns once the line has ended (spoken: its audio
	// has had the time to play; or stopped by ctx), with the text as
	// heard and whether it was cut short.
	Speak(ctx context.Context, i int) (text string, interrupted bool, err error)
	// ClientUIDs are the characters' sessions, in order: the overlay
	// watches them.
	ClientUIDs() []string
	// RecordUID is the scene's own record (the transcript, every line
	// with its speaker), "" until it has a line.
	RecordUID() string
	// Close ends the sessions (a running line is stopped, kept as heard).
	Close()
}

// Options are what the scenes are built from.
type Options struct {
	Config     Config
	Characters Characters
	Stage      Stage
	// LiveChat is the conf_uid of the live chat's character ("" when the
	// live chat is off): a scene with it may take viewers' lines.
	LiveChat string
	// Explain words a failed line for the streamer (conversation's
	// Explain); nil: the error's text.
	Explain func(error) string
	Logger  *slog.Logger
}

// Service holds the scenes: the running and paused ones, and the latest
// ended ones (scenes.keep_ended). It implements server's Scenes.
type Service struct {
	opts Options
	cfg  Config
	log  *slog.Logger
	base context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	scenes   map[string]*Scene
	ended    []string // ids of ended scenes, oldest first
	closed   bool
	draining bool // koe drains for a restart: no scene starts, no line begins
}

// New makes the service; Close stops its scenes.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{opts: opts, cfg: opts.Config, log: opts.Logger, base: ctx, stop: cancel, scenes: map[string]*Scene{}}
}

// Close stops every scene (each line running is kept as heard) and waits
// for them.
func (s *Service) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
}

// Drain is koe's drain before a restart: no scene starts and no line
// begins from now on, and it returns once the lines being said have ended
// (or ctx has). It reports whether a line was being said. Close then ends
// the scenes.
func (s *Service) Drain(ctx context.Context) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	s.draining = true
	all := make([]*Scene, 0, len(s.scenes))
	for _, sc := range s.scenes {
		all = append(all, sc)
	}
	s.mu.Unlock()
	var saying []<-chan struct{}
	for _, sc := range all {
		if done := sc.hold(); done != nil {
			saying = append(saying, done)
		}
	}
	for _, done := range saying {
		select {
		case <-done:
		case <-ctx.Done():
			return true
		}
	}
	return len(saying) > 0
}

// plan is a checked request.
type plan struct {
	chars     []protocol.SceneCharacter
	topic     string
	maxRounds int
	duration  time.Duration
	liveChat  bool
}

// check reads a request against the limits, naming the key of each.
func (s *Service) check(req protocol.SceneRequest, id string) (plan, error) {
	var p plan
	invalid := func(format string, args ...any) (plan, error) {
		return plan{}, koe.Errorf(koe.Invalid, format, args...)
	}
	switch n := len(req.Characters); {
	case n < 2:
		return invalid("a scene needs two characters or more in \"characters\" (their conf_uids), got %d", n)
	case n > s.cfg.MaxCharacters:
		return invalid("a scene may have at most %d characters (scenes.max_characters), got %d", s.cfg.MaxCharacters, n)
	}
	seen := map[string]bool{}
	for _, c := range req.Characters {
		conf, name, ok := s.opts.Characters.Character(c)
		if !ok {
			return plan{}, koe.Errorf(koe.NotFound, "no character has conf_uid %q (GET /api/characters... or the page's list names them)", quote.Shorten(c, 80))
		}
		if seen[conf] {
			return invalid("character %q is twice in the scene: each character talks in it once per round", conf)
		}
		seen[conf] = true
		p.chars = append(p.chars, protocol.SceneCharacter{ConfUID: conf, Name: name})
	}
	p.topic = strings.TrimSpace(req.Topic)
	switch n := utf8.RuneCountInString(p.topic); {
	case n == 0:
		return invalid("a scene needs a \"topic\": what the characters talk about")
	case n > s.cfg.MaxTopicChars:
		return invalid("the topic is %d characters; at most %d (scenes.max_topic_chars)", n, s.cfg.MaxTopicChars)
	}
	switch {
	case req.MaxRounds < 0:
		return invalid("max_rounds must be 1 or more, got %d", req.MaxRounds)
	case req.MaxRounds > s.cfg.MaxRounds:
		return invalid("max_rounds may be at most %d (scenes.max_rounds), got %d", s.cfg.MaxRounds, req.MaxRounds)
	}
	p.maxRounds = req.MaxRounds
	if req.Duration != "" {
		d, err := time.ParseDuration(req.Duration)
		switch {
		case err != nil:
			return invalid("duration %q: write it as 90s, 10m or 1h30m", quote.Shorten(req.Duration, 40))
		case d < time.Second:
			return invalid("duration must be at least 1s, got %s", d)
		case d > s.cfg.MaxDuration:
			return invalid("duration may be at most %s (scenes.max_duration), got %s", s.cfg.MaxDuration, d)
		}
		p.duration = d
	}
	if p.maxRounds == 0 {
		// A duration alone runs up to the most rounds allowed; nothing at
		// all, the default.
		p.maxRounds = s.cfg.DefaultRounds
		if p.duration > 0 {
			p.maxRounds = s.cfg.MaxRounds
		}
	}
	history := "scene-" + id
	if req.History != "" {
		if !koe.ValidID(req.History) {
			return invalid("history %q is not a valid history id (letters, digits, _ - .)", quote.Shorten(req.History, 80))
		}
		history = req.History
	}
	for i := range p.chars {
		p.chars[i].HistoryUID = history
	}
	p.liveChat = req.LiveChat == nil || *req.LiveChat
	return p, nil
}

func newSceneID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Start checks req and starts the scene.
func (s *Service) Start(ctx context.Context, req protocol.SceneRequest) (protocol.SceneInfo, error) {
	id := newSceneID()
	p, err := s.check(req, id)
	if err != nil {
		return protocol.SceneInfo{}, err
	}
	sc := newScene(s, id, p)
	// The slot is taken before the cast opens, so that two requests at
	// once cannot both pass scenes.max_running.
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return protocol.SceneInfo{}, koe.Errorf(koe.Unavailable, "koe is shutting down")
	case s.draining:
		s.mu.Unlock()
		return protocol.SceneInfo{}, koe.ErrRestarting
	case s.runningLocked() >= s.cfg.MaxRunning:
		s.mu.Unlock()
		return protocol.SceneInfo{}, koe.Errorf(koe.Conflict, "%d scenes are running, the most at once (scenes.max_running): stop one first", s.cfg.MaxRunning)
	}
	if p.liveChat && s.opts.LiveChat != "" {
		for _, c := range p.chars {
			if c.ConfUID == s.opts.LiveChat && s.liveSceneLocked() != nil {
				p.liveChat = false
			}
		}
	}
	sc.liveChat = p.liveChat && s.opts.LiveChat != "" && slices.ContainsFunc(p.chars, func(c protocol.SceneCharacter) bool { return c.ConfUID == s.opts.LiveChat })
	s.scenes[id] = sc
	s.wg.Add(1)
	s.mu.Unlock()

	rules := Rules
	if sc.liveChat {
		rules += "\n\n" + livechat.Instruction
	}
	cast, err := s.opts.Stage.OpenCast(sc.ctx, CastOptions{Scene: id, Characters: p.chars, Topic: p.topic, Rules: rules,
		Opening: protocol.SceneLine{Kind: protocol.SceneLineTopic, Speaker: TopicSpeaker, Text: openingText(p.topic)}})
	if err != nil {
		sc.cancel(nil)
		sc.mu.Lock()
		sc.state = protocol.SceneEnded
		sc.mu.Unlock()
		close(sc.done)
		s.mu.Lock()
		delete(s.scenes, id)
		s.mu.Unlock()
		s.wg.Done()
		return protocol.SceneInfo{}, fmt.Errorf("start the scene: %w", err)
	}
	uids := cast.ClientUIDs()
	sc.mu.Lock()
	sc.cast = cast
	for i := range sc.plan.chars {
		if i < len(uids) {
			sc.plan.chars[i].ClientUID = uids[i]
		}
	}
	sc.mu.Unlock()
	go func() {
		defer s.wg.Done()
		sc.run()
	}()
	s.log.Info("scene started", "scene", id, "characters", len(p.chars), "max_rounds", p.maxRounds, "duration", p.duration, "live_chat", sc.liveChat)
	return sc.info(), nil
}

// runningLocked counts the scenes not ended.
func (s *Service) runningLocked() int {
	n := 0
	for _, sc := range s.scenes {
		if !sc.isEnded() {
			n++
		}
	}
	return n
}

// liveSceneLocked is the scene, not ended, that takes the live chat.
func (s *Service) liveSceneLocked() *Scene {
	for _, sc := range s.scenes {
		if sc.liveChat && !sc.isEnded() {
			return sc
		}
	}
	return nil
}

// retire moves a scene to the ended ones, forgetting the oldest past
// scenes.keep_ended.
func (s *Service) retire(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, id)
	for len(s.ended) > s.cfg.KeepEnded {
		delete(s.scenes, s.ended[0])
		s.ended = s.ended[1:]
	}
}

func (s *Service) find(id string) (*Scene, error) {
	s.mu.Lock()
	sc := s.scenes[id]
	s.mu.Unlock()
	if sc == nil {
		return nil, koe.Errorf(koe.NotFound, "no scene has id %q (GET /api/scenes lists them)", quote.Shorten(id, 80))
	}
	return sc, nil
}

// List is every scene kept: running and paused ones first, then the
// ended ones, newest first.
func (s *Service) List() protocol.SceneList {
	s.mu.Lock()
	all := make([]*Scene, 0, len(s.scenes))
	for _, sc := range s.scenes {
		all = append(all, sc)
	}
	s.mu.Unlock()
	out := protocol.SceneList{Scenes: make([]protocol.SceneInfo, 0, len(all))}
	for _, sc := range all {
		out.Scenes = append(out.Scenes, sc.info())
	}
	slices.SortFunc(out.Scenes, func(a, b protocol.SceneInfo) int {
		if ea, eb := a.State == protocol.SceneEnded, b.State == protocol.SceneEnded; ea != eb {
			if ea {
				return 1
			}
			return -1
		}
		return b.StartedAt.Compare(a.StartedAt)
	})
	return out
}

// Scene is one scene's state.
func (s *Service) Scene(id string) (protocol.SceneInfo, error) {
	sc, err := s.find(id)
	if err != nil {
		return protocol.SceneInfo{}, err
	}
	return sc.info(), nil
}

// Stop ends a scene; stopping an ended one is no error.
func (s *Service) Stop(id string) (protocol.SceneInfo, error) {
	sc, err := s.find(id)
	if err != nil {
		return protocol.SceneInfo{}, err
	}
	sc.cancel(errStopped)
	<-sc.done
	return sc.info(), nil
}

// Pause holds a scene after its current line.
func (s *Service) Pause(id string) (protocol.SceneInfo, error) {
	return s.setPaused(id, true)
}

// Resume lets a paused scene go on.
func (s *Service) Resume(id string) (protocol.SceneInfo, error) {
	return s.setPaused(id, false)
}

func (s *Service) setPaused(id string, paused bool) (protocol.SceneInfo, error) {
	sc, err := s.find(id)
	if err != nil {
		return protocol.SceneInfo{}, err
	}
	if err := sc.setPaused(paused); err != nil {
		return protocol.SceneInfo{}, err
	}
	return sc.info(), nil
}

// Skip stops the line being said; the scene goes on.
func (s *Service) Skip(id string) (bool, protocol.SceneInfo, error) {
	sc, err := s.find(id)
	if err != nil {
		return false, protocol.SceneInfo{}, err
	}
	skipped := sc.skip()
	return skipped, sc.info(), nil
}

// openingText is the topic as the first character is given it.
func openingText(topic string) string {
	return "Today's topic: " + topic + "\nTalk about it with each other."
}

// errStopped ends a scene the streamer stopped.
var errStopped = errors.New("stopped by the streamer")

// SkipLine stops the line being said in the scene that takes the live
// chat of character conf (the live chat's skip), and reports whether one
// was.
func (s *Service) SkipLine(conf string) bool {
	if s == nil || conf == "" || conf != s.opts.LiveChat {
		return false
	}
	s.mu.Lock()
	sc := s.liveSceneLocked()
	s.mu.Unlock()
	return sc != nil && sc.skip()
}

// Viewers hands viewers' messages from the live chat of character conf
// to the scene that takes them, if one runs: text is the live chat's
// framed batch. It reports whether a scene took them; if so, it returns
// once a character has said the line that follows them (its text, for
// the chat), or ctx ended (a skip in the live chat: the line being said
// stops). A scene that ends before a character was given the line did not
// take it after all.
func (s *Service) Viewers(ctx context.Context, conf, text string, viewers []string) (taken bool, reply string, err error) {
	if s == nil || conf == "" || conf != s.opts.LiveChat {
		return false, "", nil
	}
	s.mu.Lock()
	sc := s.liveSceneLocked()
	s.mu.Unlock()
	if sc == nil {
		return false, "", nil
	}
	answered, ok := sc.hear(text, viewers)
	if !ok {
		return false, "", nil
	}
	select {
	case r, ok := <-answered:
		if !ok {
			// The scene ended before a character was given the
			// viewers' line: the live session answers it instead.
			return false, "", nil
		}
		return true, r, nil
	case <-ctx.Done():
		sc.skip()
		return true, "", ctx.Err()
	}
}
