package livechat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Message is one chat message.
type Message struct {
	Platform, Channel string
	User              string // display name
	Login             string // lower-case account name (blocklist matches it, case-insensitively, and User)
	Text              string
	Time              time.Time
	ID                string // platform message id, "" if none
	// Removes: a moderator removed messages: ID names one, or (ID=="") all
	// of Login's, or (ID=="" and Login=="") the whole channel's.
	Removes bool
	// Mod: a moderator of the channel or its broadcaster wrote it; their
	// commands are run.
	Mod bool
	// Action: a /me action ("alice waves"), Text without the marks.
	Action bool
	// Event is what the viewer did besides writing (EventSub...), "" for
	// a plain message; Amount its number (months, viewers, bits, gifts),
	// Recipient the viewer a subscription was given to.
	Event     string
	Amount    int
	Recipient string
}

// Events a source reports: each may start a thank-you turn (thanks.*).
const (
	EventSub   = "sub"   // a subscription or its renewal (Amount: months, if known)
	EventGift  = "gift"  // a gifted subscription (Recipient), or Amount of them
	EventRaid  = "raid"  // a raid (Amount: its viewers)
	EventCheer = "cheer" // a cheer (Amount: bits)
)

// Source is a chat platform. Run delivers messages to deliver until ctx
// ends, reconnecting on its own; it returns ctx.Err() at shutdown or an
// error wrapping ErrConfig when the configuration can never work.
type Source interface {
	Name() string
	Run(ctx context.Context, deliver func(Message)) error
}

// Character speaks one turn. Say returns when the turn has ended (spoken,
// skipped, yielded or failed), with the reply's text as it was shown (for
// the chat, with reply_in_chat); viewers are the display names it answers,
// shown on stream. ctx ending means skip. An error with a
// method Yielded() bool that reports true means the turn gave way to the
// streamer's own turn: it is no failure.
type Character interface {
	Say(ctx context.Context, text string, viewers []string) (reply string, err error)
}

// yielded reports whether err says the turn gave way (see Character).
func yielded(err error) bool {
	var y interface{ Yielded() bool }
	return errors.As(err, &y) && y.Yielded()
}

// ViewerNotes is the per-viewer memory hook: what is remembered about a
// viewer ("" when nothing).
type ViewerNotes interface {
	About(ctx context.Context, viewer string) (string, error)
}

// Reasons a message is dropped, as counted in Status.Dropped.
const (
	DropViewerRate = "viewer_rate" // the viewer sent more than max_per_viewer_per_minute
	DropQueueFull  = "queue_full"  // the queue was full; the oldest message went
	DropBlocked    = "blocked"     // the viewer is on the blocklist
	DropFiltered   = "filtered"    // the word filter matched
	DropPrefix     = "prefix"      // an ignored prefix (a bot command)
	DropRemoved    = "removed"     // a moderator removed it while it waited
	DropEmpty      = "empty"       // nothing left after cleaning
	DropStale      = "stale"       // it waited longer than max_message_age
	DropCommand    = "command"     // a command from a viewer who is no moderator
	DropThanksRate = "thanks_rate" // more events than thanks.max_per_minute
	DropEvent      = "event"       // an event (a raid...) whose thank-you is off
)

// Status is a snapshot of the runner, ready for JSON.
type Status struct {
	Paused       bool              `json:"paused"`
	Queued       int               `json:"queued"`
	Running      bool              `json:"running"`
	RunningUsers []string          `json:"running_users"`
	Received     uint64            `json:"received"`
	Turns        uint64            `json:"turns"`   // turns started
	Spoken       uint64            `json:"spoken"`  // turns Say ended without error
	Skipped      uint64            `json:"skipped"` // turns stopped by Skip
	Yielded      uint64            `json:"yielded"` // turns stopped for the streamer's own
	Failed       uint64            `json:"failed"`  // turns Say ended with an error
	Dropped      map[string]uint64 `json:"dropped"`
	// Banned are the viewers banned from the chat by a moderator's ban
	// command (the configured blocklist aside).
	Banned []string `json:"banned"`
	// Posted counts replies posted in the chat; PostDropped those not
	// posted (the reply queue was full, or posting failed).
	Posted      uint64         `json:"posted"`
	PostDropped uint64         `json:"post_dropped"`
	LastError   string         `json:"last_error,omitempty"`
	LastErrorAt *time.Time     `json:"last_error_at,omitempty"`
	Sources     []SourceStatus `json:"sources"`
	// With several koe instances sharing Redis, one runs the live chat:
	// Role is the answering instance's part (leader, starting or standby:
	// its status is then the leader's), Instance its id, Leader the
	// running instance's. The runner leaves them empty.
	Role     string `json:"role,omitempty"`
	Instance string `json:"instance,omitempty"`
	Leader   string `json:"leader,omitempty"`
}

// SourceStatus is one chat source's state.
type SourceStatus struct {
	Name      string `json:"name"`
	Connected bool   `json:"connected"`
	LastError string `json:"last_error,omitempty"`
}

// clock is time, replaceable in tests.
type clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed, and a stop
	// function.
	After(d time.Duration) (<-chan time.Time, func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

type queued struct {
	Message
	key string // per-viewer key: lower-case login, else name
}

type source struct {
	name      string
	connected func() bool
	lastErr   string
}

// Runner turns chat messages into turns of one character, one turn at a
// time. Sources call Deliver; Run is the single turn loop.
type Runner struct {
	cfg     Config
	char    Character
	notes   ViewerNotes
	log     *slog.Logger
	filter  wordFilter
	blocked map[string]bool
	clock   clock

	wake chan struct{} // buffered 1: something changed for Run

	mu          sync.Mutex
	queue       []queued
	paused      bool
	starts      []time.Time            // turn starts within the last minute
	viewers     map[string][]time.Time // accepted messages per viewer within the last minute
	viewerPrune time.Time
	running     bool
	loopActive  bool
	current     []string
	cancelTurn  context.CancelFunc
	skipped     bool
	received    uint64
	turns       uint64
	spoken      uint64
	skippedN    uint64
	yieldedN    uint64
	failed      uint64
	dropped     map[string]uint64
	lastErr     string
	lastErrAt   time.Time
	sources     []*source
	banned      map[string]bool // the session's blocklist (ban and unban)
	thanked     []time.Time     // thank-you events within the last minute
	replies     []string        // replies waiting to be posted
	posted      uint64
	postDropped uint64
	commands    chan Command
	replyWake   chan struct{}      // buffered 1: a reply is waiting
	evals       uint64             // times Run looked at the state (tests)
	onWait      func(evals uint64) // tests: called each time Run is about to wait
}

// NewRunner makes a runner. Zero limits in cfg take their defaults. notes
// may be nil.
func NewRunner(cfg Config, char Character, notes ViewerNotes, log *slog.Logger) *Runner {
	cfg = withDefaults(cfg)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	blocked := make(map[string]bool)
	for _, b := range cfg.Blocklist {
		b = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(b), "@"))
		if b != "" {
			blocked[b] = true
		}
	}
	return &Runner{
		cfg:     cfg,
		char:    char,
		notes:   notes,
		log:     log.With("component", "livechat"),
		filter:  newWordFilter(cfg.WordFilter),
		blocked: blocked,
		clock:   realClock{},
		wake:    make(chan struct{}, 1),
		viewers: make(map[string][]time.Time),
		dropped: make(map[string]uint64),
		banned:  make(map[string]bool),

		commands:  make(chan Command, commandQueue),
		replyWake: make(chan struct{}, 1),
	}
}

func withDefaults(c Config) Config {
	d := DefaultConfig()
	setInt := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	setInt(&c.MaxPerMinute, d.MaxPerMinute)
	setInt(&c.MaxPerViewerPerMinute, d.MaxPerViewerPerMinute)
	setInt(&c.MaxQueue, d.MaxQueue)
	setInt(&c.MaxBatch, d.MaxBatch)
	setInt(&c.MaxMessageChars, d.MaxMessageChars)
	setInt(&c.MaxNameChars, d.MaxNameChars)
	if c.MaxNoteChars < 0 {
		c.MaxNoteChars = 0
	}
	if c.NotesTimeout <= 0 {
		c.NotesTimeout = d.NotesTimeout
	}
	if c.History == "" {
		c.History = d.History
	}
	if checkViewerFormat(c.ViewerFormat) != nil {
		c.ViewerFormat = d.ViewerFormat
	}
	if checkViewerFormat(c.ActionFormat) != nil {
		c.ActionFormat = d.ActionFormat
	}
	if c.MaxMessageAge < 0 {
		c.MaxMessageAge = 0
	}
	setInt(&c.ReplyMaxChars, d.ReplyMaxChars)
	c.ReplyMaxChars = min(c.ReplyMaxChars, twitchMaxChars)
	setInt(&c.ReplyRateMessages, d.ReplyRateMessages)
	if c.ReplyRateWindow <= 0 {
		c.ReplyRateWindow = d.ReplyRateWindow
	}
	c.ReplyMinInterval = max(c.ReplyMinInterval, 0)
	setInt(&c.ReplyQueue, d.ReplyQueue)
	setInt(&c.Thanks.MaxPerMinute, d.Thanks.MaxPerMinute)
	setInt(&c.Thanks.MinBits, d.Thanks.MinBits)
	return c
}

// AddSource lists a source in Status with its connection state.
func (r *Runner) AddSource(name string, connected func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sources = append(r.sources, &source{name: name, connected: connected})
}

// RunSource runs s, delivering to r, and records its ending error in
// Status. It returns what s.Run returns.
func (r *Runner) RunSource(ctx context.Context, s Source) error {
	err := s.Run(ctx, r.Deliver)
	if err != nil && ctx.Err() == nil {
		r.mu.Lock()
		for _, src := range r.sources {
			if src.name == s.Name() {
				src.lastErr = err.Error()
			}
		}
		r.mu.Unlock()
		r.recordError(fmt.Errorf("live chat source %s: %w", s.Name(), err))
	}
	return err
}

func (r *Runner) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Runner) dropLocked(reason string, n int) {
	r.dropped[reason] += uint64(n)
}

// Deliver takes a message from a source: it is cleaned, filtered and
// queued. It never blocks on a turn and is safe from many goroutines.
func (r *Runner) Deliver(m Message) {
	if m.Removes {
		r.remove(m)
		return
	}
	login := strings.ToLower(strings.TrimSpace(m.Login))
	rawUser := strings.ToLower(strings.TrimSpace(m.User))
	name := cleanName(m.User, r.cfg.MaxNameChars)
	if name == "" {
		name = cleanName(login, r.cfg.MaxNameChars)
	}
	if name == "" {
		name = "anonymous"
	}
	raw := strings.TrimSpace(m.Text)
	text := cleanText(raw, r.cfg.MaxMessageChars)
	key := login
	if key == "" {
		key = strings.ToLower(name)
	}
	m.User, m.Login, m.Text = name, login, text
	m.Recipient = cleanName(m.Recipient, r.cfg.MaxNameChars)
	if m.Time.IsZero() {
		m.Time = r.clock.Now()
	}
	thanks := r.thanks(m)
	if m.Event != "" && !thanks && (m.Event == EventCheer || m.Event == EventSub) && text != "" {
		// Not thanked, a cheer's or a renewal's words are a message.
		m.Event = ""
	}
	cmd, isCmd := Command{}, false
	if m.Event == "" && !m.Action {
		cmd, isCmd = r.cfg.Commands.parse(raw)
	}

	reason := ""
	switch {
	case isCmd && m.Mod:
		// A moderator's command is run, never answered as a message.
		cmd.By = name
		r.mu.Lock()
		r.received++
		r.mu.Unlock()
		r.command(cmd)
		return
	case isCmd:
		reason = DropCommand
	case m.Event != "" && !thanks:
		reason = DropEvent
	case text == "" && m.Event == "":
		reason = DropEmpty
	case m.Event == "" && r.hasIgnoredPrefix(raw):
		reason = DropPrefix
	case r.blocked[login] || r.blocked[strings.ToLower(name)] || r.blocked[rawUser]:
		reason = DropBlocked
	case r.filter.match(text):
		reason = DropFiltered
	}

	r.mu.Lock()
	r.received++
	if reason == "" && (r.banned[login] || r.banned[strings.ToLower(name)] || r.banned[rawUser]) {
		reason = DropBlocked
	}
	if reason == "" && m.Event != "" && !r.thanksAllowLocked() {
		reason = DropThanksRate
	}
	if reason == "" && m.Event == "" && !r.viewerAllowLocked(key) {
		reason = DropViewerRate
	}
	if reason != "" {
		r.dropLocked(reason, 1)
		r.mu.Unlock()
		r.log.Debug("live chat message dropped", "reason", reason, "viewer", name, "platform", m.Platform)
		return
	}
	if len(r.queue) >= r.cfg.MaxQueue {
		over := len(r.queue) - r.cfg.MaxQueue + 1
		r.queue = append(r.queue[:0], r.queue[over:]...)
		r.dropLocked(DropQueueFull, over)
	}
	r.queue = append(r.queue, queued{Message: m, key: key})
	r.mu.Unlock()
	r.signal()
}

// thanks reports whether m is an event whose thank-you is on.
func (r *Runner) thanks(m Message) bool {
	t := r.cfg.Thanks
	switch m.Event {
	case EventSub, EventGift:
		return t.Sub
	case EventRaid:
		return t.Raid
	case EventCheer:
		return t.Cheer && m.Amount >= t.MinBits
	}
	return false
}

// thanksAllowLocked applies thanks.max_per_minute and records the event
// when allowed.
func (r *Runner) thanksAllowLocked() bool {
	cut := r.clock.Now().Add(-time.Minute)
	i := 0
	for i < len(r.thanked) && !r.thanked[i].After(cut) {
		i++
	}
	r.thanked = r.thanked[i:]
	if len(r.thanked) >= r.cfg.Thanks.MaxPerMinute {
		return false
	}
	r.thanked = append(r.thanked, r.clock.Now())
	return true
}

func (r *Runner) hasIgnoredPrefix(text string) bool {
	for _, p := range r.cfg.IgnorePrefixes {
		if p != "" && strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

// viewerAllowLocked applies the per-viewer sliding window and records the
// message when allowed.
func (r *Runner) viewerAllowLocked(key string) bool {
	now := r.clock.Now()
	cut := now.Add(-time.Minute)
	if now.Sub(r.viewerPrune) > time.Minute {
		for k, ts := range r.viewers {
			if len(ts) == 0 || !ts[len(ts)-1].After(cut) {
				delete(r.viewers, k)
			}
		}
		r.viewerPrune = now
	}
	ts := r.viewers[key]
	i := 0
	for i < len(ts) && !ts[i].After(cut) {
		i++
	}
	ts = ts[i:]
	if len(ts) >= r.cfg.MaxPerViewerPerMinute {
		r.viewers[key] = ts
		return false
	}
	r.viewers[key] = append(ts, now)
	return true
}

func (r *Runner) remove(m Message) {
	login := strings.ToLower(strings.TrimSpace(m.Login))
	r.mu.Lock()
	n := r.dropWhereLocked(DropRemoved, func(q queued) bool {
		match := m.Channel == "" || q.Channel == m.Channel
		if m.Platform != "" && q.Platform != m.Platform {
			match = false
		}
		switch {
		case !match:
		case m.ID != "":
			match = q.ID == m.ID
		case login != "":
			match = q.Login == login
		}
		return match
	})
	r.mu.Unlock()
	if n > 0 {
		r.log.Info("live chat messages removed by a moderator", "count", n, "login", login, "id", m.ID)
	}
}

// Pause stops new turns from starting; messages keep queueing.
func (r *Runner) Pause() {
	r.mu.Lock()
	r.paused = true
	r.mu.Unlock()
	r.signal()
}

// Resume lets turns start again.
func (r *Runner) Resume() {
	r.mu.Lock()
	r.paused = false
	r.mu.Unlock()
	r.signal()
}

// Skip stops the running turn and reports whether one was running.
func (r *Runner) Skip() bool {
	r.mu.Lock()
	cancel := r.cancelTurn
	if cancel != nil {
		r.skipped = true
	}
	r.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel()
	return true
}

// Status returns a snapshot.
func (r *Runner) Status() Status {
	r.mu.Lock()
	st := Status{
		Paused:       r.paused,
		Queued:       len(r.queue),
		Running:      r.running,
		RunningUsers: append([]string{}, r.current...),
		Received:     r.received,
		Turns:        r.turns,
		Spoken:       r.spoken,
		Skipped:      r.skippedN,
		Yielded:      r.yieldedN,
		Failed:       r.failed,
		Dropped:      make(map[string]uint64, len(r.dropped)),
		LastError:    r.lastErr,
		Banned:       r.bannedLocked(),
		Posted:       r.posted,
		PostDropped:  r.postDropped,
	}
	for k, v := range r.dropped {
		st.Dropped[k] = v
	}
	if !r.lastErrAt.IsZero() {
		t := r.lastErrAt
		st.LastErrorAt = &t
	}
	srcs := make([]source, len(r.sources))
	for i, s := range r.sources {
		srcs[i] = *s
	}
	r.mu.Unlock()
	// connected() belongs to another component: call it without the lock.
	st.Sources = make([]SourceStatus, 0, len(srcs))
	for _, s := range srcs {
		ss := SourceStatus{Name: s.name, LastError: s.lastErr}
		if s.connected != nil {
			ss.Connected = s.connected()
		}
		st.Sources = append(st.Sources, ss)
	}
	return st
}

func (r *Runner) recordError(err error) {
	r.mu.Lock()
	r.lastErr = err.Error()
	r.lastErrAt = r.clock.Now()
	r.mu.Unlock()
	r.log.Warn("live chat", "err", err)
}

// Run is the turn loop: it waits for messages while not paused, keeps to
// max_per_minute, folds up to max_batch messages into one turn and has
// the character say it. It returns ctx.Err() when ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.loopActive {
		r.mu.Unlock()
		return errors.New("live chat runner: Run is already running")
	}
	r.loopActive = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.loopActive = false
		r.mu.Unlock()
	}()
	for {
		batch, turnCtx, err := r.next(ctx)
		if err != nil {
			return err
		}
		r.turn(ctx, turnCtx, batch)
	}
}

// next waits until a turn may start and takes its batch.
func (r *Runner) next(ctx context.Context) ([]queued, context.Context, error) {
	for {
		var wait time.Duration
		r.mu.Lock()
		r.evals++
		evals := r.evals
		if !r.paused {
			r.dropStaleLocked()
		}
		if !r.paused && len(r.queue) > 0 {
			now := r.clock.Now()
			cut := now.Add(-time.Minute)
			i := 0
			for i < len(r.starts) && !r.starts[i].After(cut) {
				i++
			}
			r.starts = r.starts[i:]
			if len(r.starts) < r.cfg.MaxPerMinute {
				n := min(len(r.queue), r.cfg.MaxBatch)
				batch := append([]queued(nil), r.queue[:n]...)
				r.queue = append(r.queue[:0], r.queue[n:]...)
				r.starts = append(r.starts, now)
				turnCtx, cancel := context.WithCancel(ctx)
				r.running = true
				r.turns++
				r.cancelTurn = cancel
				r.skipped = false
				r.current = batchUsers(batch)
				r.mu.Unlock()
				return batch, turnCtx, nil
			}
			wait = r.starts[0].Add(time.Minute).Sub(now)
		}
		r.mu.Unlock()
		if r.onWait != nil {
			r.onWait(evals)
		}
		var timer <-chan time.Time
		stop := func() {}
		if wait > 0 {
			timer, stop = r.clock.After(wait)
		}
		select {
		case <-ctx.Done():
			stop()
			return nil, nil, ctx.Err()
		case <-r.wake:
		case <-timer:
		}
		stop()
	}
}

func batchUsers(batch []queued) []string {
	var users []string
	seen := make(map[string]bool)
	for _, q := range batch {
		if !seen[q.key] {
			seen[q.key] = true
			users = append(users, q.User)
		}
	}
	return users
}

// turn builds the text of one batch and has the character say it.
func (r *Runner) turn(ctx, turnCtx context.Context, batch []queued) {
	text := r.buildText(turnCtx, batch)
	var err error
	var reply string
	if turnCtx.Err() == nil {
		reply, err = r.char.Say(turnCtx, text, batchUsers(batch))
	}
	r.mu.Lock()
	skipped := r.skipped
	r.cancelTurn()
	r.cancelTurn = nil
	r.running = false
	r.current = nil
	switch {
	case skipped:
		r.skippedN++
	case ctx.Err() != nil:
		// shutdown: neither spoken nor failed
	case yielded(err):
		r.yieldedN++
	case err != nil:
		r.failed++
	default:
		r.spoken++
	}
	r.mu.Unlock()
	if err != nil && !skipped && !yielded(err) && ctx.Err() == nil {
		r.recordError(fmt.Errorf("live chat turn: %w", err))
	}
	if skipped {
		r.log.Info("live chat turn skipped", "viewers", len(batchUsers(batch)))
	}
	if err == nil && !skipped && ctx.Err() == nil && r.cfg.ReplyInChat {
		r.postReply(reply)
	}
}

// buildText writes, inside the chat frame, one line per message and,
// with notes, one line per distinct viewer about what is remembered, each
// viewer's text quoted.
func (r *Runner) buildText(ctx context.Context, batch []queued) string {
	var lines []string
	if r.notes != nil && r.cfg.MaxNoteChars > 0 {
		lines = append(lines, r.noteLines(ctx, batch)...)
	}
	for _, q := range batch {
		lines = append(lines, r.line(q.Message))
	}
	return frame(lines)
}

func (r *Runner) noteLines(ctx context.Context, batch []queued) []string {
	type viewer struct{ id, name string }
	var vs []viewer
	seen := make(map[string]bool)
	for _, q := range batch {
		if seen[q.key] {
			continue
		}
		seen[q.key] = true
		id := q.Login
		if id == "" {
			id = q.User
		}
		vs = append(vs, viewer{id, q.User})
	}
	type result struct {
		i    int
		note string
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.NotesTimeout)
	defer cancel()
	// Buffered: a look-up that ignores ctx finishes into the buffer and
	// ends after the turn went on without it.
	results := make(chan result, len(vs))
	for i, v := range vs {
		go func() {
			note, err := r.notes.About(ctx, v.id)
			if err != nil {
				r.log.Warn("live chat: viewer notes", "viewer", v.id, "err", err)
				note = ""
			}
			results <- result{i, note}
		}()
	}
	notes := make([]string, len(vs))
wait:
	for range vs {
		select {
		case res := <-results:
			notes[res.i] = cleanText(res.note, r.cfg.MaxNoteChars)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				r.log.Warn("live chat: viewer notes took longer than notes_timeout", "timeout", r.cfg.NotesTimeout)
			}
			// Keep the answers that did arrive.
			for {
				select {
				case res := <-results:
					notes[res.i] = cleanText(res.note, r.cfg.MaxNoteChars)
					continue
				default:
				}
				break wait
			}
		}
	}
	var lines []string
	for i, v := range vs {
		if notes[i] != "" {
			lines = append(lines, "What you remember about "+v.name+": "+quote(notes[i]))
		}
	}
	return lines
}
