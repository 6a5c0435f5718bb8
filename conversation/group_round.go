package conversation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"koe"
	"koe/agent"
	"koe/protocol"
)

// A multi-character round: characters take turns in order on a shared
// transcript. Each reply is an ordinary turn of the speaking character's
// session (its persona, memory, recall and tools, its history, its
// watchers and metrics): the only differences are the input (what was
// said since the character last spoke, each line naming its speaker), the
// group prompt at the end of its system prompt, and the audience, which
// also gets every frame of the turn (audience.go).
//
// Groups of clients (group.go) and scenes use it: a group runs a round for
// each human message, a scene runs rounds on a topic.

// GroupConf is the conf uid under which the groups' own records are kept
// in the history store: a group's conversation is a history of this
// pseudo-character, one per group, with each record naming its speaker.
// No character may have it (Character.Validate refuses it).
const GroupConf = "koe-groups"

// Line is one line of a group's conversation.
type Line struct {
	// Name is who said it: a person's name, or a character's.
	Name string
	// ConfUID is the character who said it; "" for a person.
	ConfUID string
	// Avatar is the speaking character's avatar, kept in the record.
	Avatar string
	Text   string
}

// Transcript is a group's shared conversation. It keeps the lines, what
// each character has been given of them, and the group's own record (a
// history of GroupConf that any member can reopen). Safe for concurrent
// use.
type Transcript struct {
	store HistoryStore

	mu sync.Mutex
	// lines are the lines some speaker has not been given yet (and the
	// latest ones): those every speaker has are dropped at the start of a
	// round (trim), so a group that talks for days holds no more than a
	// round or so. base is the number of lines dropped before lines[0].
	lines []Line
	base  int
	// seen is how many lines each speaking session (by client_uid: two
	// members may bring the same character) has been given or said,
	// counted from the transcript's first line: its next turn gets the
	// lines after them.
	seen map[string]int
	// record is the uid of the group's record ("" until its first line).
	record string
	// last is the latest write to the record: each waits for the one
	// before, so the record keeps the lines' order.
	last *recordWrite
}

// recordWrite is one line on its way to the group's record.
type recordWrite struct {
	done chan struct{}
	err  error // set before done is closed
}

// NewTranscript starts an empty transcript whose record goes to store.
func NewTranscript(store HistoryStore) *Transcript {
	return &Transcript{store: store, seen: map[string]int{}}
}

// RecordUID is the history uid of the group's record under GroupConf, ""
// until a line has been stored.
func (tr *Transcript) RecordUID() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.record
}

// Lines returns a copy of the lines still held: every line since the
// oldest one some speaker of the last round had not been given (the
// group's record keeps them all).
func (tr *Transcript) Lines() []Line {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]Line(nil), tr.lines...)
}

// Add appends a line and stores it in the group's record (created with
// its first line). The line is kept even when storing fails: the round
// goes on, and the error says what was lost.
func (tr *Transcript) Add(ctx context.Context, l Line) error {
	w := tr.add(ctx, "", l)
	<-w.done
	return w.err
}

// add appends a line said by the speaking session speaker ("": a
// person), which has then seen every line so far, and starts storing it
// after the lines before it: the caller may wait for it, or go on (a
// person's message is stored alongside the first reply's request, as a
// turn stores its user's: a disk sync is not worth delaying the first
// words for).
func (tr *Transcript) add(ctx context.Context, speaker string, l Line) *recordWrite {
	rec := koe.Record{Role: koe.RoleHuman, Name: l.Name, Content: l.Text}
	if l.ConfUID != "" {
		rec = koe.Record{Role: koe.RoleAI, Name: l.Name, Avatar: l.Avatar, Content: l.Text}
	}
	tr.mu.Lock()
	tr.lines = append(tr.lines, l)
	if speaker != "" {
		tr.seen[speaker] = tr.base + len(tr.lines)
	}
	uid, fresh := tr.record, tr.record == ""
	if fresh {
		uid = koe.NewHistoryUID(time.Now())
		tr.record = uid
	}
	w := &recordWrite{done: make(chan struct{})}
	prev := tr.last
	tr.last = w
	tr.mu.Unlock()
	if tr.store == nil {
		close(w.done)
		return w
	}
	// Stored on a context of its own: a round stopped now still keeps
	// what was said. The goroutine ends with its one store call.
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(w.done)
		if prev != nil {
			<-prev.done
		}
		var err error
		if fresh {
			err = tr.store.CreateWith(ctx, GroupConf, uid, rec)
		} else {
			err = tr.store.Append(ctx, GroupConf, uid, rec)
		}
		if err != nil {
			w.err = fmt.Errorf("store the group's line: %w", err)
		}
	}()
	return w
}

// unseen returns the lines speaker has not been given yet and marks them
// given.
func (tr *Transcript) unseen(speaker string) []Line {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	from := max(tr.seen[speaker], tr.base) - tr.base
	tr.seen[speaker] = tr.base + len(tr.lines)
	return append([]Line(nil), tr.lines[from:]...)
}

// trim drops the lines every one of a round's speakers has been given,
// and forgets the speakers no longer in it (a member who left). A
// speaker new to the transcript is given the lines still held.
func (tr *Transcript) trim(speakers []*Session) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	low := tr.base + len(tr.lines)
	in := make(map[string]bool, len(speakers))
	for _, s := range speakers {
		in[s.clientUID] = true
		low = min(low, max(tr.seen[s.clientUID], tr.base))
	}
	for uid := range tr.seen {
		if !in[uid] {
			delete(tr.seen, uid)
		}
	}
	if n := low - tr.base; n > 0 {
		// A new array: the old one would keep every dropped line.
		tr.lines = append([]Line(nil), tr.lines[n:]...)
		tr.base = low
	}
}

// groupInput is what a character is given at its turn: the lines since
// it last spoke, one per line, each as "Name: words".
func groupInput(lines []Line) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l.Name)
		b.WriteString(": ")
		b.WriteString(strings.TrimSpace(l.Text))
	}
	return b.String()
}

// groupRules is the group prompt: who else is there, and how the lines
// the character is given name their speakers.
func groupRules(self string, people, characters []string) string {
	var others []string
	for _, c := range characters {
		if c != self {
			others = append(others, c)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s, talking in a group conversation.", self)
	if len(people) > 0 {
		fmt.Fprintf(&b, " The people in it: %s.", strings.Join(people, ", "))
	}
	if len(others) > 0 {
		fmt.Fprintf(&b, " The other characters in it: %s.", strings.Join(others, ", "))
	}
	b.WriteString(" Each message you are given holds what was said since you last spoke, one line per speaker, as \"Name: words\". ")
	fmt.Fprintf(&b, "Answer as %s only, in your own voice: do not write your name in front of your answer, and do not speak for anyone else.", self)
	return b.String()
}

// RoundOptions describe one round.
type RoundOptions struct {
	// Transcript is the group's conversation; the round adds each reply.
	Transcript *Transcript
	// Speakers are the characters' sessions, in speaking order. A
	// session may be a client's or a headless one (a scene's).
	Speakers []*Session
	// Audience also gets every frame of each reply, besides the speaking
	// session's own client and watchers (a group's other members, a chat
	// API stream). A speaker listed here does not get its own turn twice.
	Audience []Listener
	// Replies is how many replies the round makes at most: the speakers
	// answer in turn, from the first, until it is reached.
	Replies int
	// People name the humans in the group, for the group prompt.
	People []string
}

// Listener is one more audience of a round's turns.
type Listener struct {
	// Out gets the frames, after the speaker's own client. An Out that
	// is an Offerer (the server's connections and event streams) gets
	// them by Offer: the speaker never waits for its audience, as it
	// never waits for a watcher. Any other Out's Send must not block.
	Out Sender
	// KoeEvents: it also gets koe's own events (tokens, status,
	// messages), not only the OLV frames.
	KoeEvents bool
	// Session, if set, is the listener's own session: it does not get
	// the frames of its own turns twice.
	Session *Session
}

// Offerer is a Sender that also takes a copy of another session's frame
// without waiting. A listener that falls too far behind to take it is
// dropped by its owner, as a watcher that fell behind is: a closed
// connection leaves its group, a closed event stream stops its chat.
type Offerer interface {
	Offer(ctx context.Context, msg any)
}

// RoundResult tells how a round went.
type RoundResult struct {
	// Replies are the lines the characters said, in order (an interrupted
	// reply as heard).
	Replies []Line
	// Stopped: the round was stopped before it made all its replies.
	Stopped bool
}

// ErrNoSpeakers: a round needs at least one character.
var ErrNoSpeakers = errors.New("a round needs at least one speaking character")

// RoundInterrupted is the cause to cancel a round's context with when a
// person interrupted it: heard is what they heard of the reply being
// spoken, which the speaker's memory and history keep. Any other cause
// stops the round as a stop request does.
func RoundInterrupted(heard string) error { return interruptCause{heard: heard} }

// RunRound runs one round: each speaker in turn answers what was said
// since it last spoke, until opts.Replies replies are made or ctx ends.
// Stopping ctx (see RoundInterrupted) stops the reply being made, for
// every audience at once, and ends the round. It returns once the last
// turn has stored its records.
func (h *Hub) RunRound(ctx context.Context, opts RoundOptions) (RoundResult, error) {
	var res RoundResult
	if len(opts.Speakers) == 0 {
		return res, ErrNoSpeakers
	}
	if opts.Transcript == nil {
		return res, errors.New("a round needs a transcript")
	}
	opts.Transcript.trim(opts.Speakers)
	names := make([]string, len(opts.Speakers))
	for i, s := range opts.Speakers {
		names[i] = s.Character().Name
	}
	var errs []error
	for i := 0; i < opts.Replies; i++ {
		if ctx.Err() != nil {
			res.Stopped = true
			break
		}
		sp := opts.Speakers[i%len(opts.Speakers)]
		line, stopped, err := h.groupTurn(ctx, sp, opts, groupRules(sp.Character().Name, opts.People, names))
		if errors.Is(err, errNothingNew) {
			// Nobody said anything since this character spoke: it
			// would talk to itself.
			break
		}
		if line.Text != "" {
			res.Replies = append(res.Replies, line)
		}
		if stopped {
			res.Stopped = true
			break
		}
		if errors.Is(err, koe.ErrRestarting) {
			return res, err
		}
		if err != nil {
			// Every audience saw the failure; the next character may
			// still answer, as OLV goes on after a member's error.
			errs = append(errs, fmt.Errorf("%s's reply: %w", sp.Character().Name, err))
		}
	}
	return res, errors.Join(errs...)
}

// errNothingNew: a character's turn would have no new line to answer.
var errNothingNew = errors.New("nothing new to answer")

// groupTurn runs one character's turn of a round and returns what it
// said. stopped: the round's context ended during it.
func (h *Hub) groupTurn(ctx context.Context, sp *Session, opts RoundOptions, rules string) (Line, bool, error) {
	c, _ := sp.current()
	char := c.char
	lines := opts.Transcript.unseen(sp.clientUID)
	if len(lines) == 0 {
		return Line{}, false, errNothingNew
	}
	gt := &groupTurnState{tr: opts.Transcript, speaker: sp.clientUID, line: Line{Name: char.Name, ConfUID: char.ConfUID, Avatar: char.Avatar}}
	c.agent.SetGroupRules(rules)
	defer c.agent.SetGroupRules("")
	aud := newAudience(sp, opts.Audience)
	sp.audience.Store(aud)
	defer sp.audience.CompareAndSwap(aud, nil)
	for l := range aud.players {
		l.listening.Store(aud)
		defer l.listening.CompareAndSwap(aud, nil)
	}
	t := sp.start(turnInput{text: groupInput(lines), group: gt})
	if t == nil {
		return Line{}, false, koe.ErrRestarting
	}
	stopped := false
	select {
	case <-t.done:
	case <-ctx.Done():
		cause := context.Cause(ctx)
		var ic interruptCause
		if !errors.As(cause, &ic) {
			cause = errStopped
		}
		sp.turns.stopTurn(t, cause)
		stopped = true
	}
	line := gt.line
	if ctx.Err() != nil {
		stopped = true
	}
	return line, stopped, t.err
}

// groupTurnState is what a group turn tells the round: written by the
// turn's goroutine before the turn is done.
type groupTurnState struct {
	tr      *Transcript
	speaker string // the speaking session's client_uid
	// line is the character's line, with its text once said.
	line Line
}

// keep adds what the character said to the transcript and the group's
// record: as the turn stores its reply, before its chain ends, so that a
// client reading the record after the chain's end finds the reply.
func (gt *groupTurnState) keep(ctx context.Context, log *slog.Logger, text string) {
	// A reasoning model's thinking is its own: the others are given, and
	// the group's record keeps, what it said.
	text = agent.StripThink(text)
	gt.line.Text = text
	if strings.TrimSpace(text) == "" {
		// Blanks are nothing said: no line for the others to answer.
		gt.line.Text = ""
		return
	}
	w := gt.tr.add(ctx, gt.speaker, gt.line)
	<-w.done
	if w.err != nil {
		log.Error("could not store a reply in the group's record", "err", w.err)
	}
}

// audience is who else gets a group turn's frames (besides the speaking
// session's client and watchers): emit hands each of them its copy.
type audience struct {
	speaker   *Session
	listeners []Listener
	// koe: a listener takes koe's own events (see takesKoeEvents).
	koe bool

	// players are the listeners' sessions whose clients play the reply
	// and say when they have (frontend-playback-complete); the turn waits
	// for them as for its own client, once armed.
	players   map[*Session]bool
	mu        sync.Mutex
	armed     bool
	pending   map[*Session]bool
	allPlayed chan struct{}
}

func newAudience(speaker *Session, ls []Listener) *audience {
	a := &audience{speaker: speaker, players: map[*Session]bool{}, allPlayed: make(chan struct{})}
	for _, l := range ls {
		if l.Session != speaker && l.Out != nil {
			a.listeners = append(a.listeners, l)
			a.koe = a.koe || l.KoeEvents
			if p := l.Session; p != nil && !p.textOnly && !p.headless {
				a.players[p] = true
			}
		}
	}
	return a
}

// arm starts counting the players' playback: the turn's
// backend-synth-complete is about to go out. A nil audience (no round)
// does nothing.
func (a *audience) arm() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed = true
	a.pending = maps.Clone(a.players)
	if len(a.pending) == 0 {
		close(a.allPlayed)
	}
}

// played notes that p's client has played the reply.
func (a *audience) played(p *Session) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.armed || !a.pending[p] {
		return
	}
	delete(a.pending, p)
	if len(a.pending) == 0 {
		close(a.allPlayed)
	}
}

// allPlayedCh is closed once every player has played the reply; nil (a
// wait that never ends, so the caller does not wait on it) without a
// round.
func (a *audience) allPlayedCh() <-chan struct{} {
	if a == nil {
		return nil
	}
	return a.allPlayed
}

// offer sends each listener its copy of a turn's frame: what a watcher
// sees (a turn's output, never the answers to the speaker's own
// requests), with audio marked forwarded, as OLV marks the audio of
// another member's character, so that the OLV client plays it without
// reporting its playback. The frames go by the turn's watchers' context:
// they outlive the speaker's own (a listener may lag a little) and end
// when the turn is stopped.
func (a *audience) offer(ctx context.Context, msg any) {
	kind := watchable(msg)
	if _, ok := msg.(protocol.Error); ok {
		// A failed reply is the group's news, not only its speaker's: a
		// watcher is spared errors, a member is not (docs/protocol.md).
		kind = watchAll
	}
	if kind == watchNone || len(a.listeners) == 0 {
		return
	}
	if tw, _ := ctx.Value(watchContextKey{}).(*watchCtx); tw != nil {
		ctx = tw.ctx
	}
	if au, ok := msg.(protocol.Audio); ok {
		au.Forwarded = true
		msg = au
	}
	// A speaker's turn opens with the lines it was given as its human
	// message, which names the speaker's own history: a member's client
	// has its own, and saw the lines as they were said.
	ownHuman := false
	if m, ok := msg.(protocol.MessageEvent); ok && m.Content.Type == protocol.MessageHuman {
		ownHuman = true
	}
	for _, l := range a.listeners {
		if kind == watchKoe && !l.KoeEvents || ownHuman && l.Session != nil {
			continue
		}
		if o, ok := l.Out.(Offerer); ok {
			o.Offer(ctx, msg)
		} else if err := l.Out.Send(ctx, msg); err != nil && ctx.Err() == nil {
			a.speaker.log.Debug("group frame not queued", "err", err)
		}
	}
}
