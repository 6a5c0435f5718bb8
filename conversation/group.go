package conversation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"koe"
	"koe/internal/quote"
	"koe/protocol"
)

// Groups, as Open-LLM-VTuber's clients make them: a client invites another
// connected client by its client_uid and becomes the group's owner; a
// message from any member then goes to the group, and every member's
// character answers in turn (a round, group_round.go), seen and heard by
// every member. What the owner may do, what members are told and what
// happens when someone leaves follow OLV's server; where koe differs it
// says why (docs/protocol.md, "Groups").

// GroupsConfig bounds the groups of clients.
type GroupsConfig struct {
	// MaxMembers bounds the clients of one group (each brings its
	// character, which speaks once per round).
	MaxMembers int `yaml:"max_members"`
	// Rounds is how many times each member's character speaks after one
	// human message: the replies of one message are Rounds × members.
	// OLV's characters go on talking until someone interrupts.
	Rounds int `yaml:"rounds"`
}

// DefaultGroupsConfig: a few friends, each character answering once.
func DefaultGroupsConfig() GroupsConfig { return GroupsConfig{MaxMembers: 4, Rounds: 1} }

// Validate names the key of a bound that can never work.
func (c GroupsConfig) Validate() error {
	if c.MaxMembers < 2 || c.MaxMembers > 32 {
		return fmt.Errorf("conversation.groups.max_members must be between 2 and 32, got %d", c.MaxMembers)
	}
	if c.Rounds < 1 || c.Rounds > 20 {
		return fmt.Errorf("conversation.groups.rounds must be between 1 and 20, got %d", c.Rounds)
	}
	return nil
}

// Group is a group of clients, each with its character. Its state is
// guarded by the hub's groups lock; rounds run one at a time.
type Group struct {
	hub *Hub
	// id is "group_" and the client_uid of the client that made it, as
	// OLV names groups; it stays when the owner changes.
	id string
	tr *Transcript

	// Guarded by hub.groups.mu.
	owner   *Session
	members []*Session // in the order they joined

	// roundMu guards round: a message swaps its round in under it, in
	// one step with the stop of the one before, so two members' messages
	// at once cannot leave two rounds running. Nothing waits or sends
	// under it.
	roundMu sync.Mutex
	round   *runningRound
}

// runningRound is a group's round in its goroutine.
type runningRound struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
	// by is the member whose message started it (nil: the chat API).
	by *Session
	// err is how its replies failed, set before done is closed (nil: none
	// did, or it was stopped).
	err error
}

// groupSet is the hub's groups.
type groupSet struct {
	mu   sync.Mutex
	byID map[string]*Group
}

// ID is the group's id, which the chat API names a group by.
func (g *Group) ID() string { return g.id }

// RecordUID is the history uid of the group's record (under GroupConf),
// "" until its first line.
func (g *Group) RecordUID() string { return g.tr.RecordUID() }

// Group returns the group with this id, or nil.
func (h *Hub) Group(id string) *Group {
	h.groups.mu.Lock()
	defer h.groups.mu.Unlock()
	return h.groups.byID[id]
}

// memberSnapshot is a group's members and owner, copied under the lock.
type memberSnapshot struct {
	owner   *Session
	members []*Session
}

func (g *Group) snapshot() memberSnapshot {
	g.hub.groups.mu.Lock()
	defer g.hub.groups.mu.Unlock()
	return memberSnapshot{owner: g.owner, members: append([]*Session(nil), g.members...)}
}

func (m memberSnapshot) uids() []string {
	out := make([]string, len(m.members))
	for i, s := range m.members {
		out[i] = s.clientUID
	}
	return out
}

// groupResult answers a group request.
func groupResult(ok bool, format string, args ...any) protocol.GroupOperationResult {
	return protocol.GroupOperationResult{Type: protocol.TypeGroupOperationResult, Success: ok, Message: fmt.Sprintf(format, args...)}
}

// noGroup is the group-update of a client in no group.
func noGroup() protocol.GroupUpdate {
	return protocol.GroupUpdate{Type: protocol.TypeGroupUpdate, Members: []string{}}
}

// tellMembers sends every member its group-update.
func (g *Group) tellMembers(m memberSnapshot) {
	uids := m.uids()
	for _, s := range m.members {
		s.reply(g.update(uids, s == m.owner))
	}
}

func (g *Group) update(uids []string, owner bool) protocol.GroupUpdate {
	return protocol.GroupUpdate{Type: protocol.TypeGroupUpdate, Members: uids, IsOwner: owner, GroupID: g.id, HistoryUID: g.tr.RecordUID()}
}

// groupInfo answers request-group-info.
func (s *Session) groupInfo() {
	g := s.group.Load()
	if g == nil {
		s.reply(noGroup())
		return
	}
	m := g.snapshot()
	s.reply(g.update(m.uids(), m.owner == s))
}

// invite adds the client inviteeUID to s's group, making the group (with
// s as its owner) if s is in none. Every refusal is a
// group-operation-result that says why.
func (s *Session) invite(inviteeUID string) {
	h := s.hub
	if inviteeUID == s.clientUID {
		s.reply(groupResult(false, "You cannot invite yourself"))
		return
	}
	invitee := h.Session(inviteeUID)
	// Only an OLV client can be a member: a chat API turn, a live or
	// scene session and a Realtime API connection speak no group-update.
	if invitee == nil || invitee.textOnly || invitee.headless || invitee.playsItself || !protocol.ValidClientUID(inviteeUID) {
		s.reply(groupResult(false, "Invitee %s does not exist", quote.Shorten(inviteeUID, 80)))
		return
	}
	max := s.deps.Config.Groups.MaxMembers
	h.groups.mu.Lock()
	g := s.group.Load()
	var refusal string
	switch {
	case invitee.leaving.Load():
		refusal = fmt.Sprintf("Invitee %s does not exist", inviteeUID)
	case invitee.group.Load() != nil:
		refusal = fmt.Sprintf("Invitee %s is already in a group", inviteeUID)
	case g != nil && g.owner != s:
		refusal = "Only the group owner can invite members"
	case g != nil && len(g.members) >= max:
		refusal = fmt.Sprintf("The group is full: it has %d members, the most conversation.groups.max_members allows", len(g.members))
	}
	if refusal != "" {
		h.groups.mu.Unlock()
		s.reply(groupResult(false, "%s", refusal))
		return
	}
	if g == nil {
		if h.groups.byID == nil {
			h.groups.byID = map[string]*Group{}
		}
		// A group the client founded may live on under another owner.
		id := "group_" + s.clientUID
		for n := 2; h.groups.byID[id] != nil; n++ {
			id = fmt.Sprintf("group_%s_%d", s.clientUID, n)
		}
		g = &Group{hub: h, id: id, tr: NewTranscript(s.deps.Store), owner: s, members: []*Session{s}}
		h.groups.byID[g.id] = g
		s.group.Store(g)
	}
	g.members = append(g.members, invitee)
	invitee.group.Store(g)
	m := memberSnapshot{owner: g.owner, members: append([]*Session(nil), g.members...)}
	h.groups.mu.Unlock()

	s.reply(groupResult(true, "Successfully added %s to the group", inviteeUID))
	invitee.reply(groupResult(true, "You have been invited to the group by %s", s.clientUID))
	for _, o := range m.members {
		if o != s && o != invitee {
			o.reply(groupResult(true, "Member %s was added to the group", inviteeUID))
		}
	}
	g.tellMembers(m)
}

// removeFromGroup takes targetUID out of its group: the owner may remove
// anyone, a member only itself. A group left with one member is gone.
func (s *Session) removeFromGroup(targetUID string) {
	h := s.hub
	h.groups.mu.Lock()
	var g *Group
	var target *Session
	for _, cand := range h.groups.byID {
		for _, m := range cand.members {
			if m.clientUID == targetUID {
				g, target = cand, m
			}
		}
	}
	switch {
	case g == nil:
		h.groups.mu.Unlock()
		s.reply(groupResult(false, "Target %s is not in any group", quote.Shorten(targetUID, 80)))
		return
	case s != g.owner && s != target:
		h.groups.mu.Unlock()
		s.reply(groupResult(false, "Only group owner or self can remove members"))
		return
	}
	left, gone := g.dropLocked(target)
	h.groups.mu.Unlock()

	// The round's speakers are who was there: it stops, as it does when a
	// member leaves.
	g.stopRound(errStopped, nil)
	s.reply(groupResult(true, "Successfully removed %s from the group", targetUID))
	if target != s {
		target.reply(groupResult(true, "You have been removed from the group"))
	}
	target.reply(noGroup())
	for _, o := range gone {
		o.reply(noGroup())
	}
	for _, o := range left.members {
		if o != s {
			o.reply(groupResult(true, "Member %s was removed from the group", targetUID))
		}
	}
	g.tellMembers(left)
}

// dropLocked takes s out of g, hands the ownership on if s had it, and
// ends a group left with fewer than two members: gone are the members
// that left with it. hub.groups.mu is held.
func (g *Group) dropLocked(s *Session) (left memberSnapshot, gone []*Session) {
	for i, m := range g.members {
		if m == s {
			g.members = append(g.members[:i:i], g.members[i+1:]...)
			break
		}
	}
	s.group.Store(nil)
	if g.owner == s && len(g.members) > 0 {
		g.owner = g.members[0]
	}
	if len(g.members) < 2 {
		gone = g.members
		for _, m := range gone {
			m.group.Store(nil)
		}
		g.members = nil
		delete(g.hub.groups.byID, g.id)
	}
	return memberSnapshot{owner: g.owner, members: append([]*Session(nil), g.members...)}, gone
}

// leaveGroup takes a closing session out of its group: the group's round
// stops (OLV interrupts it), the ownership passes to the member who
// joined next, and the others are told.
func (s *Session) leaveGroup() {
	// Set under the lock invitations take: none adds s from now on.
	s.hub.groups.mu.Lock()
	s.leaving.Store(true)
	s.hub.groups.mu.Unlock()
	g := s.group.Load()
	if g == nil {
		return
	}
	g.stopRound(errStopped, nil)
	h := s.hub
	h.groups.mu.Lock()
	if s.group.Load() != g {
		h.groups.mu.Unlock()
		return
	}
	left, gone := g.dropLocked(s)
	h.groups.mu.Unlock()
	for _, o := range gone {
		o.reply(noGroup())
		o.reply(groupResult(true, "Member %s disconnected", s.clientUID))
	}
	for _, o := range left.members {
		o.reply(groupResult(true, "Member %s disconnected", s.clientUID))
	}
	g.tellMembers(left)
}

// inGroup returns s's group if a message of s goes to it: a group of at
// least two members.
func (s *Session) inGroup() *Group {
	g := s.group.Load()
	if g == nil || len(g.snapshot().members) < 2 {
		return nil
	}
	return g
}

// stopRound stops the group's running round with cause and waits for it
// to end. by is the member who interrupted (nil: nobody's client
// stopped on its own): every other member's client is told to stop
// playing, as OLV tells them. It reports whether a round was running.
func (g *Group) stopRound(cause error, by *Session) bool {
	g.roundMu.Lock()
	r := g.round
	g.roundMu.Unlock()
	if r == nil {
		return false
	}
	select {
	case <-r.done:
		return false // it ended on its own
	default:
	}
	r.cancel(cause)
	g.stopped(r, by)
	return true
}

// stopped waits for the cancelled round r to end and tells every member
// but by to stop playing.
func (g *Group) stopped(r *runningRound, by *Session) {
	<-r.done
	for _, m := range g.snapshot().members {
		if m != by {
			// OLV's clients stop on interrupt-signal, koe's on control
			// interrupt, as when a stop request stops their turn.
			m.reply(protocol.Text{Type: protocol.TypeInterruptSignal, Text: protocol.ConversationInterrupted})
			m.reply(protocol.Control(protocol.ControlInterrupt))
		}
	}
}

// interruptGroup stops the round of s's group, if one runs: heard is what
// s heard of the reply being spoken.
func (s *Session) interruptGroup(heard string) bool {
	g := s.group.Load()
	if g == nil {
		return false
	}
	return g.stopRound(RoundInterrupted(heard), s)
}

// peopleNames names each member's person for the transcript: its
// character's human_name, with its client_uid when two members share
// one.
func peopleNames(members []*Session) map[*Session]string {
	count := map[string]int{}
	for _, m := range members {
		count[m.Character().HumanName]++
	}
	out := map[*Session]string{}
	for _, m := range members {
		n := m.Character().HumanName
		if n == "" {
			n = "Human"
		}
		if count[m.Character().HumanName] > 1 {
			n += " (" + m.clientUID + ")"
		}
		out[m] = n
	}
	return out
}

// say puts a person's message to the group and starts a round on it,
// stopping the round still running (the new message wins, as a new input
// does in one client's conversation; OLV ignores it). from is the member
// who said it, or nil with name set (the chat API); extra listeners also
// get every frame. The round runs under ctx; it is done (r.done) once it
// has ended.
//
// say only swaps the new round in and returns: the round's goroutine
// waits for the stopped one to store what it said, and tells the members,
// so that neither a lock nor the caller (a client's read loop) waits on
// the store or on a member's queue.
func (g *Group) say(ctx context.Context, from *Session, name, text string, extra []Listener) (*runningRound, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, invalid("empty input: type something first")
	}
	if from != nil && from.turns.isDraining() {
		// A recording heard as the drain began (sayToGroup checked
		// before it was heard).
		return nil, koe.ErrRestarting
	}
	rctx, cancel := context.WithCancelCause(ctx)
	r := &runningRound{cancel: cancel, done: make(chan struct{}), by: from}
	// The members and the round's swap in one step under the lock that
	// leaving and removal take: a member marked leaving, or dropped, before
	// it is left out; one that leaves after it finds the round to stop.
	g.hub.groups.mu.Lock()
	m := memberSnapshot{owner: g.owner, members: slices.DeleteFunc(slices.Clone(g.members), func(o *Session) bool { return o.leaving.Load() })}
	ok := len(m.members) >= 2 && (from == nil || slices.Contains(m.members, from))
	var prev *runningRound
	if ok {
		g.roundMu.Lock()
		prev = g.round
		g.round = r
		g.roundMu.Unlock()
	}
	g.hub.groups.mu.Unlock()
	if !ok {
		cancel(nil)
		// It ended, or the member left, while the message was heard.
		return nil, invalid("you are in no group any more: the message was not sent")
	}
	// Cancelled here, in the caller's order: a later message cancels
	// this round in turn, before or after it starts.
	stopPrev := false
	if prev != nil {
		select {
		case <-prev.done:
		default:
			prev.cancel(errSuperseded)
			stopPrev = true
		}
	}
	go func() {
		defer close(r.done)
		defer cancel(nil)
		defer func() {
			g.roundMu.Lock()
			if g.round == r {
				g.round = nil
			}
			g.roundMu.Unlock()
		}()
		if prev != nil {
			// Two rounds never run at once: this one starts once the one
			// it stopped has ended, and has stored what was said.
			if stopPrev {
				g.stopped(prev, from)
			} else {
				<-prev.done
			}
		}
		r.err = g.runSaid(rctx, m, from, name, text, extra)
	}()
	return r, nil
}

// runSaid puts the message to the group's record and members and runs
// its round, in the round's goroutine. The error is how its replies
// failed.
func (g *Group) runSaid(ctx context.Context, m memberSnapshot, from *Session, name, text string, extra []Listener) error {
	names := peopleNames(m.members)
	if from != nil {
		name = names[from]
	}
	fresh := g.tr.RecordUID() == ""
	// Stored alongside the first reply's request; the replies' lines wait
	// for it, so the record keeps the order.
	w := g.tr.add(ctx, "", Line{Name: name, Text: text})
	go func() {
		<-w.done
		if w.err != nil {
			g.hub.log.Error("could not store a message in the group's record", "err", w.err)
		}
	}()
	if fresh {
		// The members learn where the group's record is.
		g.tellMembers(m)
	}
	// Every other member sees the message, as OLV shows it.
	for _, o := range m.members {
		if o != from {
			o.reply(protocol.Text{Type: protocol.TypeUserInputTranscription, Text: text})
		}
	}
	// The speaker's own character answers first, then the others in the
	// order they joined.
	speakers := m.members
	if from != nil {
		for i, o := range m.members {
			if o == from {
				speakers = append(append([]*Session(nil), m.members[i:]...), m.members[:i]...)
			}
		}
	}
	people := make([]string, 0, len(m.members)+1)
	for _, o := range m.members {
		people = append(people, names[o])
	}
	if from == nil {
		people = append(people, name)
	}
	aud := make([]Listener, 0, len(m.members)+len(extra))
	for _, o := range m.members {
		aud = append(aud, Listener{Out: o.out, KoeEvents: o.koeEvents, Session: o})
	}
	aud = append(aud, extra...)
	opts := RoundOptions{Transcript: g.tr, Speakers: speakers, Audience: aud, People: people,
		Replies: g.hub.deps.Config.Groups.Rounds * len(speakers)}
	_, err := g.hub.RunRound(ctx, opts)
	if err != nil && !errors.Is(err, context.Canceled) {
		g.hub.log.Warn("group round failed", "group", g.id, "err", err)
		return err
	}
	return nil
}

// sayToGroup puts a member's input to its group. A recording is heard
// first, as a one-client turn hears it.
func (s *Session) sayToGroup(g *Group, in turnInput) error {
	if s.turns.isDraining() {
		// Refused before it stops the round whose reply the drain waits
		// for, as a one-client input is.
		return koe.ErrRestarting
	}
	if in.recording != nil {
		s.groupHearing.Add(1)
		go func() {
			defer s.groupHearing.Done()
			s.hearForGroup(g, in.recording)
		}()
		return nil
	}
	if len(in.images) > 0 {
		return invalid("a group message carries text only: images are not shared with the group's characters")
	}
	_, err := g.say(s.ctx, s, "", in.text, nil)
	return err
}

// hearForGroup transcribes a member's recording, shows the member what
// was heard, and puts it to the group. It runs in a goroutine of its
// own, bounded by the session's context, that Close waits for.
func (s *Session) hearForGroup(g *Group, wav []byte) {
	if !s.hearing.CompareAndSwap(false, true) {
		s.reply(protocol.NewError("koe is still hearing your last recording"))
		return
	}
	text, err := s.hearText(wav)
	s.hearing.Store(false)
	if err != nil {
		s.reply(protocol.NewError(Explain(err).Message))
		return
	}
	s.reply(protocol.Text{Type: protocol.TypeUserInputTranscription, Text: text})
	if text == "" {
		return
	}
	if _, err := g.say(s.ctx, s, "", text, nil); err != nil {
		s.reply(protocol.NewError(Explain(err).Message))
	}
}

// hearText transcribes wav within the hub's ASR slots.
func (s *Session) hearText(wav []byte) (string, error) {
	engine := s.deps.ASR
	if engine == nil {
		if err := s.deps.ASRErr; err != nil {
			return "", invalid("speech input is off (%v): type your message instead", err)
		}
		return "", invalid("speech input is off: type your message instead")
	}
	if err := s.hub.asr.acquire(s.ctx, false); err != nil {
		return "", err
	}
	text, err := engine.Transcribe(s.ctx, wav)
	s.hub.asr.release()
	if err != nil {
		s.deps.Observer.DependencyFailed(ServiceASR, err)
		return "", fmt.Errorf("transcribe a group message: %w", err)
	}
	return strings.TrimSpace(text), nil
}
