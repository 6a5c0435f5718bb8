package live

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"koe/conversation"
	"koe/livechat"
)

// Stages open characters' live sessions (conversation's Hub).
type Stages interface {
	OpenLive(ctx context.Context, opts conversation.LiveOptions) (*conversation.Live, error)
}

// chat is the audience's chat feeding a character's live session while it
// runs on this instance: the session, the runner turning messages into
// its turns, and the sources (Twitch) delivering them, each in a
// goroutine the chat owns.
type chat struct {
	live   *conversation.Live
	runner *livechat.Runner
	cancel context.CancelFunc
	wg     sync.WaitGroup
	keep   func() // keeps the chat's state once its goroutines ended
}

// Scenes take the chat's messages while a scene with the chat's
// character runs (package scene): they enter it as lines the characters
// may answer, instead of a turn of the live session.
type Scenes interface {
	// Viewers reports whether a scene took the batch (text as the live
	// chat frames it); if so it returns once a character said the line
	// after it (that line, for the chat), and ending ctx stops the line
	// being said.
	Viewers(ctx context.Context, conf, text string, viewers []string) (taken bool, reply string, err error)
	// SkipLine stops the line being said in the scene that takes the
	// chat of character conf, and reports whether one was.
	SkipLine(conf string) bool
}

// speaker is the live session as livechat's Character: a turn, and the
// reply as it was shown, for the chat; or, while a scene takes the chat,
// the scene's next line.
type speaker struct {
	live   *conversation.Live
	scenes Scenes
	conf   string
}

func (s speaker) Say(ctx context.Context, text string, viewers []string) (string, error) {
	if s.scenes != nil {
		if taken, reply, err := s.scenes.Viewers(ctx, s.conf, text, viewers); taken {
			return reply, err
		}
	}
	return s.live.Reply(ctx, text, viewers)
}

// startChat opens the live session of live_chat.character in
// live_chat.history and starts reading the chat into it, from the state
// kept when it last stopped (paused, no turn starts until it is resumed).
func (s *Service) startChat(saved livechat.Saved) (*chat, error) {
	lc := s.opts.Config
	ctx, cancel := context.WithCancel(context.Background())
	// The audience's messages come framed as quoted data (package
	// livechat); the rules tell the model so, whatever prompt is saved.
	live, err := s.opts.Stages.OpenLive(ctx, conversation.LiveOptions{Character: lc.Character, History: lc.History, Rules: livechat.Instruction})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("live_chat: %w", err)
	}
	char := live.Character()
	log := s.opts.Logger.With("live_chat", char.ConfUID)
	var notes livechat.ViewerNotes
	if s.opts.Recall != nil && char.Memory.Recall && lc.MaxNoteChars > 0 {
		notes = viewerNotes{recall: s.opts.Recall, conf: char.ConfUID, budget: char.Memory.RecallBudget}
	}
	twitch, err := livechat.NewTwitch(lc.Twitch, log)
	if err != nil {
		live.Close()
		cancel()
		return nil, fmt.Errorf("live_chat.twitch: %w", err)
	}
	c := &chat{live: live, runner: livechat.NewRunner(lc, speaker{live: live, scenes: s.opts.Scenes, conf: char.ConfUID}, notes, log), cancel: cancel}
	c.keep = func() { s.keep(context.Background(), c) }
	c.runner.AddSource(twitch.Name(), twitch.Connected)
	c.runner.Restore(saved)
	if n := len(saved.Queue); n > 0 || saved.Paused || len(saved.Banned) > 0 {
		log.Info("live chat: its state kept at the last stop is back", "paused", saved.Paused, "waiting", n, "banned", len(saved.Banned))
	}
	c.wg.Add(3)
	go func() {
		// The moderators' commands, run here as the streamer's are.
		defer c.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case cmd := <-c.runner.Commands():
				if _, err := s.run(ctx, c, cmd.Name, cmd.Arg); err != nil {
					log.Warn("live chat: a command from the chat failed", "command", cmd.Name, "by", cmd.By, "err", err)
				}
			}
		}
	}()
	if lc.ReplyInChat {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			_ = c.runner.RunReplies(ctx, twitch)
		}()
	}
	go func() {
		defer c.wg.Done()
		if err := c.runner.RunSource(ctx, twitch); err != nil && ctx.Err() == nil {
			// A configuration Twitch refuses (a wrong token) stays refused
			// until the streamer fixes it: koe keeps serving everything else.
			log.Error("live chat: the Twitch chat is not read", "err", err)
		}
	}()
	go func() {
		defer c.wg.Done()
		if err := c.runner.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("live chat stopped", "err", err)
		}
	}()
	log.Info("live chat is on", "twitch", lc.Twitch.Channel, "history", lc.History, "paused", saved.Paused, "reply_in_chat", lc.ReplyInChat,
		"watch", "/client-ws?watch_conf="+char.ConfUID)
	return c, nil
}

// stop ends the chat's goroutines (a running turn is skipped and kept as
// far as it was heard) and then the live session.
func (c *chat) stop() {
	if c == nil {
		return
	}
	c.cancel()
	c.wg.Wait()
	c.keep()
	c.live.Close()
}
