package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"koe/coord"
	"koe/livechat"
)

// Options are what a live chat is built from.
type Options struct {
	// Config is live_chat.*. Its character is DefaultCharacter (the
	// configuration file's conf_uid) unless live_chat.character names
	// another.
	Config           livechat.Config
	DefaultCharacter string
	// Stages opens the character's live session.
	Stages Stages
	// Recall, if set, is what the character remembers of each viewer.
	Recall Recaller
	// Elect makes the election, by its name, of the one instance among
	// those sharing Redis that runs the chat (coord's Leader); nil: the
	// chat runs here.
	Elect func(name string) Leadership
	// Lease bounds each request to Redis about the chat (coord.lease).
	Lease time.Duration
	// Running, if set, is told whether the chat runs on this instance.
	Running func(bool)
	// StateDir, without an election, is where the chat's state (the
	// pause, the waiting messages, the session's blocklist) is kept
	// across a restart (data_dir); "" keeps nothing. With an election it
	// is kept in Redis.
	StateDir string
	// Scenes, if set, take the chat's messages while a scene with the
	// chat's character runs here.
	Scenes Scenes
	Logger *slog.Logger
}

// Leadership is the election of the one instance that runs the live chat
// among those sharing Redis (coord's Leader).
type Leadership interface {
	Run(ctx context.Context, lead func(context.Context), answer func(context.Context, []byte) ([]byte, error)) error
	State() coord.LeaderState
	Ask(ctx context.Context, req []byte) ([]byte, error)
	SetShared(ctx context.Context, field, value string) error
	Shared(ctx context.Context, field string) (string, error)
}

var _ Leadership = (*coord.Leader)(nil)

// Service is the live chat as koe serves it. Without an election it runs
// here. With one, the instances elect one to run it (so that the
// character answers each message once); the others stand by, forward the
// streamer's commands to it and take over when it stops or dies.
type Service struct {
	opts   Options
	log    *slog.Logger
	leader Leadership // nil: no election, the chat runs here
	cancel context.CancelFunc
	done   chan struct{} // closed when the election's goroutine ended
	state  stateStore    // nil: nothing is kept across a restart

	mu  sync.Mutex
	cur *chat // the chat while it runs here
}

// sharedPaused is the field of the election's shared state that keeps the
// streamer's pause across a change of leader.
const sharedPaused = "paused"

// Open starts the live chat here, or takes part in the election of the
// instance that runs it.
func Open(opts Options) (*Service, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Running == nil {
		opts.Running = func(bool) {}
	}
	conf := opts.Config.Character
	if conf == "" {
		conf = opts.DefaultCharacter
	}
	s := &Service{opts: opts, log: opts.Logger.With("live_chat", conf)}
	if opts.Elect == nil {
		var saved livechat.Saved
		if opts.StateDir != "" {
			s.state = fileState{path: stateFile(opts.StateDir, conf)}
			var err error
			if saved, err = s.state.load(context.Background()); err != nil {
				s.log.Warn("live chat: its kept state is not taken back; it starts unpaused with no message waiting", "err", err)
				saved = livechat.Saved{}
			}
		}
		c, err := s.startChat(saved)
		if err != nil {
			return nil, err
		}
		s.cur = c
		opts.Running(true)
		return s, nil
	}
	s.leader = opts.Elect("live:" + conf)
	s.state = redisState{s.leader}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.leader.Run(ctx, s.lead, s.answer); err != nil {
			s.log.Error("live chat: the election stopped", "err", err)
		}
	}()
	s.log.Info("live chat: the instances sharing redis elect the one that runs it; the others stand by",
		"instance", s.leader.State().Instance)
	return s, nil
}

// Close ends the live chat here (and gives the lead up, letting another
// instance take over at once). A nil Service is a live chat that is off.
func (s *Service) Close() {
	if s == nil {
		return
	}
	if s.leader != nil {
		s.cancel()
		<-s.done
		return
	}
	s.cur.stop()
	s.opts.Running(false)
}

func (s *Service) current() *chat {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// lead runs the live chat while this instance leads, paused if the
// streamer left it paused on the previous leader.
func (s *Service) lead(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, s.opts.Lease)
	saved, err := s.state.load(rctx)
	cancel()
	if err != nil {
		s.log.Warn("live chat: could not read whether the streamer paused it, and what waited; it starts unpaused with no message waiting", "err", err)
		saved = livechat.Saved{}
	}
	c, err := s.startChat(saved)
	if err != nil {
		// Returning gives the lead up; another instance (or this one,
		// later) tries again.
		s.log.Error("live chat: this instance leads but could not start it", "err", err)
		return
	}
	s.mu.Lock()
	s.cur = c
	s.mu.Unlock()
	s.opts.Running(true)
	<-ctx.Done()
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
	c.stop()
	s.opts.Running(false)
	s.log.Info("live chat: stopped on this instance")
}

// Commands of the live chat, as forwarded between instances.
const (
	liveStatus = "status"
	livePause  = "pause"
	liveResume = "resume"
	liveSkip   = "skip"
)

type liveRequest struct {
	Command string `json:"command"`
	Arg     string `json:"arg,omitempty"`
}

type liveReply struct {
	Skipped bool            `json:"skipped"`
	Status  livechat.Status `json:"status"`
}

// The commands only moderators give, in the chat: the chat runs on the
// instance they reach, so they are never forwarded.
const (
	liveClear = livechat.CommandClear
	liveBan   = livechat.CommandBan
	liveUnban = livechat.CommandUnban
)

// answer runs a command forwarded by another instance.
func (s *Service) answer(ctx context.Context, req []byte) ([]byte, error) {
	var r liveRequest
	if err := json.Unmarshal(req, &r); err != nil {
		return nil, fmt.Errorf("unreadable live chat command: %w", err)
	}
	c := s.current()
	if c == nil {
		return nil, errors.New("the live chat is not running on the leading instance yet")
	}
	reply, err := s.run(ctx, c, r.Command, r.Arg)
	if err != nil {
		return nil, err
	}
	return json.Marshal(reply)
}

// run runs a command on the chat running here; one that changes what a
// restart must find is kept (in Redis for the next leader, or the file).
func (s *Service) run(ctx context.Context, c *chat, cmd, arg string) (liveReply, error) {
	var reply liveReply
	switch cmd {
	case liveStatus:
	case livePause:
		c.runner.Pause()
		s.keep(ctx, c)
	case liveResume:
		c.runner.Resume()
		s.keep(ctx, c)
	case liveSkip:
		reply.Skipped = c.runner.Skip()
		if !reply.Skipped && s.opts.Scenes != nil {
			// The chat goes into a scene: the streamer's skip (and a
			// moderator's) stops the scene's line being said.
			reply.Skipped = s.opts.Scenes.SkipLine(c.live.Character().ConfUID)
		}
	case liveClear:
		c.runner.Clear()
		s.keep(ctx, c)
	case liveBan:
		if _, err := c.runner.Ban(arg); err != nil {
			return reply, err
		}
		s.keep(ctx, c)
	case liveUnban:
		c.runner.Unban(arg)
		s.keep(ctx, c)
	default:
		return reply, fmt.Errorf("unknown live chat command %q", cmd)
	}
	reply.Status = c.runner.Status()
	s.describe(&reply.Status)
	return reply, nil
}

// describe adds this instance's part in the election to st.
func (s *Service) describe(st *livechat.Status) {
	if s.leader == nil {
		return
	}
	e := s.leader.State()
	st.Role, st.Instance, st.Leader = string(e.Role), e.Instance, e.Leader
}

// do runs cmd here if the chat runs here, else on the leader.
func (s *Service) do(ctx context.Context, cmd string) (liveReply, error) {
	if c := s.current(); c != nil {
		return s.run(ctx, c, cmd, "")
	}
	if s.leader == nil {
		return liveReply{}, errors.New("the live chat is not running (see koe's log)")
	}
	req, err := json.Marshal(liveRequest{Command: cmd})
	if err != nil {
		return liveReply{}, err
	}
	body, err := s.leader.Ask(ctx, req)
	e := s.leader.State()
	if err != nil {
		err = fmt.Errorf("live chat: this instance (%s, %s) does not run the live chat and could not forward %q to the one that does: %w",
			e.Instance, e.Role, cmd, err)
		if cmd != liveStatus {
			return liveReply{}, err
		}
		// The status says who this instance is and why it knows no more.
		st := livechat.Status{RunningUsers: []string{}, Dropped: map[string]uint64{}, Sources: []livechat.SourceStatus{}, LastError: err.Error()}
		s.describe(&st)
		return liveReply{Status: st}, nil
	}
	var reply liveReply
	if err := json.Unmarshal(body, &reply); err != nil {
		return liveReply{}, fmt.Errorf("live chat: unreadable answer of the leading instance: %w", err)
	}
	// The leader's status, as this instance's answer.
	reply.Status.Role, reply.Status.Instance = string(e.Role), e.Instance
	return reply, nil
}

// Status is the live chat's state.
func (s *Service) Status(ctx context.Context) (livechat.Status, error) {
	r, err := s.do(ctx, liveStatus)
	return r.Status, err
}

// Pause stops new turns from starting; messages keep queueing.
func (s *Service) Pause(ctx context.Context) (livechat.Status, error) {
	r, err := s.do(ctx, livePause)
	return r.Status, err
}

// Resume lets turns start again.
func (s *Service) Resume(ctx context.Context) (livechat.Status, error) {
	r, err := s.do(ctx, liveResume)
	return r.Status, err
}

// Skip stops the running turn and reports whether one was running.
func (s *Service) Skip(ctx context.Context) (bool, livechat.Status, error) {
	r, err := s.do(ctx, liveSkip)
	return r.Skipped, r.Status, err
}
