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

// The live session is told which viewers each turn answers.
var _ livechat.Addressed = (*conversation.Live)(nil)

// chat is the audience's chat feeding a character's live session while it
// runs on this instance: the session, the runner turning messages into
// its turns, and the sources (Twitch) delivering them, each in a
// goroutine the chat owns.
type chat struct {
	live   *conversation.Live
	runner *livechat.Runner
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startChat opens the live session of live_chat.character in
// live_chat.history and starts reading the chat into it; paused, no turn
// starts until it is resumed.
func (s *Service) startChat(paused bool) (*chat, error) {
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
	c := &chat{live: live, runner: livechat.NewRunner(lc, live, notes, log), cancel: cancel}
	c.runner.AddSource(twitch.Name(), twitch.Connected)
	if paused {
		c.runner.Pause()
	}
	c.wg.Add(2)
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
	log.Info("live chat is on", "twitch", lc.Twitch.Channel, "history", lc.History, "paused", paused,
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
	c.live.Close()
}
