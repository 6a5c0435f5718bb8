package conversation

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"koe"
	"koe/internal/quote"
	"koe/protocol"
)

// A scene's cast (package scene runs the scene): its characters, each in
// a headless session of its own in the history the scene names, heard
// only through watchers (the overlay), taking turns through the round
// (group_round.go) on one transcript, which keeps the scene's record.

// SceneCastOptions say who talks in a scene.
type SceneCastOptions struct {
	// Scene is the scene's id: the sessions' client_uids are made from it.
	Scene string
	// Characters are conf_uids, in speaking order; Histories the history
	// each talks in (created if it does not exist yet).
	Characters, Histories []string
	// Opening is the transcript's first line (the topic).
	Opening Line
	// Rules end the system prompt of each character's session.
	Rules string
}

// SceneCast is a scene's characters taking turns.
type SceneCast struct {
	hub      *Hub
	tr       *Transcript
	sessions []*Session
	counted  []func()
	close    sync.Once
}

// sceneClientUID is the client_uid of character i's session in a scene:
// the overlay watches it (?watch=).
func sceneClientUID(scene string, i int) string {
	id := fmt.Sprintf("scene-%s-%d", scene, i)
	if len(id) > protocol.MaxClientUIDLen {
		id = id[len(id)-protocol.MaxClientUIDLen:]
	}
	return id
}

// OpenSceneCast opens a headless session per character of a scene. ctx
// bounds their life; Close ends them.
func (h *Hub) OpenSceneCast(ctx context.Context, opts SceneCastOptions) (*SceneCast, error) {
	if len(opts.Histories) != len(opts.Characters) {
		return nil, errors.New("scene: a history per character")
	}
	c := &SceneCast{hub: h, tr: NewTranscript(h.deps.Store)}
	for i, conf := range opts.Characters {
		s, err := h.openStaged(ctx, conf, opts.Histories[i], sceneClientUID(opts.Scene, i), opts.Rules, "scene")
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("scene: %w", err)
		}
		c.sessions = append(c.sessions, s)
		c.counted = append(c.counted, sync.OnceFunc(h.deps.Observer.SessionOpened("scene")))
	}
	if err := c.tr.Add(ctx, opts.Opening); err != nil {
		h.log.Warn("scene: its opening is not in its record", "scene", opts.Scene, "err", err)
	}
	return c, nil
}

// openStaged opens a headless session of character conf in history uid
// (created if it does not exist yet), registered as client uid so that
// watchers can follow it.
func (h *Hub) openStaged(ctx context.Context, conf, historyUID, uid, rules, kind string) (*Session, error) {
	char, ok := h.deps.Characters.Find(conf)
	if !ok {
		return nil, koe.Errorf(koe.NotFound, "no character has conf_uid %q", quote.Shorten(conf, 80))
	}
	if !koe.ValidID(historyUID) {
		return nil, koe.Errorf(koe.Invalid, "history %q is not a valid history id", quote.Shorten(historyUID, 80))
	}
	if _, err := h.deps.Store.LastSeq(ctx, char.ConfUID, historyUID); errors.Is(err, koe.ErrNotFound) {
		if err := h.deps.Store.CreateWith(ctx, char.ConfUID, historyUID); err != nil {
			return nil, fmt.Errorf("create history %s of %s: %w", historyUID, char.ConfUID, err)
		}
	} else if err != nil {
		return nil, err
	}
	s := newSession(ctx, h, discard{}, SessionOptions{ClientUID: uid, Headless: true, Rules: rules, Logger: h.log.With(kind, uid)}, char)
	if err := h.register(s); err != nil {
		return nil, err
	}
	if _, err := s.loadHistory(char.ConfUID, historyUID); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Hear adds a line no character said (viewers' messages) to the
// transcript.
func (c *SceneCast) Hear(ctx context.Context, l protocol.SceneLine) error {
	return c.tr.Add(ctx, Line{Name: l.Speaker, Text: l.Text})
}

// Speak has character i say one line in a round that names every
// character of the scene, from i on. A line that says nothing (stopped
// before a word was heard, or a model that answered only blanks) leaves
// a mark in the transcript in its place: the next character is given
// it, so it has something new to answer (the round never asks a
// character who has nothing new), and the one who said nothing learns
// it at its next line.
func (c *SceneCast) Speak(ctx context.Context, i int) (string, bool, error) {
	speakers := append(append([]*Session(nil), c.sessions[i:]...), c.sessions[:i]...)
	res, err := c.hub.RunRound(ctx, RoundOptions{Transcript: c.tr, Speakers: speakers, Replies: 1})
	text := ""
	if len(res.Replies) > 0 {
		text = res.Replies[0].Text
	}
	if text == "" && (err == nil || res.Stopped) {
		mark := SaidNothing
		if res.Stopped {
			mark = CutOff
		}
		char := c.sessions[i].Character()
		if err := c.tr.Add(context.WithoutCancel(ctx), Line{Name: char.Name, ConfUID: char.ConfUID, Avatar: char.Avatar, Text: mark}); err != nil {
			c.hub.log.Warn("scene: a line that said nothing is not marked in its record", "err", err)
		}
	}
	return text, res.Stopped, err
}

// The marks a scene's transcript keeps in place of a line that said
// nothing, as that character's line ("Mio: (says nothing)").
const (
	CutOff      = "(cut off before saying anything)"
	SaidNothing = "(says nothing)"
)

// ClientUIDs are the sessions' client_uids, in speaking order.
func (c *SceneCast) ClientUIDs() []string {
	out := make([]string, len(c.sessions))
	for i, s := range c.sessions {
		out[i] = s.clientUID
	}
	return out
}

// RecordUID is the scene's record (a history of GroupConf).
func (c *SceneCast) RecordUID() string { return c.tr.RecordUID() }

// Close ends the sessions; a line being said stops, kept as heard.
func (c *SceneCast) Close() {
	c.close.Do(func() {
		for i, s := range c.sessions {
			s.Close()
			c.counted[i]()
		}
	})
}
