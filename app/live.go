package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"koe/config"
	"koe/conversation"
	"koe/livechat"
	"koe/recall"
)

// liveChat is the audience's chat feeding a character's live session:
// the session, the runner turning messages into its turns, and the
// sources (Twitch) delivering them, each in a goroutine Main owns.
type liveChat struct {
	live   *conversation.Live
	runner *livechat.Runner
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startLiveChat opens the live session of live_chat.character in
// live_chat.history and starts reading the chat into it; paused, no turn
// starts until it is resumed.
func (m *Main) startLiveChat(cfg config.Config, paused bool) (*liveChat, error) {
	lc := cfg.LiveChat
	ctx, cancel := context.WithCancel(context.Background())
	// The audience's messages come framed as quoted data (package
	// livechat); the rules tell the model so, whatever prompt is saved.
	live, err := m.hub.OpenLive(ctx, conversation.LiveOptions{Character: lc.Character, History: lc.History, Rules: livechat.Instruction})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("live_chat: %w", err)
	}
	log := m.Logger.With("live_chat", live.Session().Info().ConfUID)
	var notes livechat.ViewerNotes
	if char, ok := findCharacter(cfg, m.Getenv, live.Session().Info().ConfUID); ok && char.Memory.Recall && lc.MaxNoteChars > 0 {
		notes = viewerNotes{recall: m.recall, conf: char.ConfUID, budget: char.Memory.RecallBudget}
	}
	twitch, err := livechat.NewTwitch(lc.Twitch, log)
	if err != nil {
		live.Close()
		cancel()
		return nil, fmt.Errorf("live_chat.twitch: %w", err)
	}
	c := &liveChat{live: live, runner: livechat.NewRunner(lc, live, notes, log), cancel: cancel}
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
		"watch", "/client-ws?watch_conf="+live.Session().Info().ConfUID)
	return c, nil
}

// stop ends the chat's goroutines (a running turn is skipped and kept as
// far as it was heard) and then the live session.
func (c *liveChat) stop() {
	if c == nil {
		return
	}
	c.cancel()
	c.wg.Wait()
	c.live.Close()
}

// findCharacter is the character conf ("" for the default one) as the
// configuration describes it.
func findCharacter(cfg config.Config, getenv func(string) string, conf string) (conversation.Character, bool) {
	if conf == "" || conf == cfg.Character.ConfUID {
		return cfg.Character, true
	}
	return config.NewCharacters(cfg, getenv).Find(conf)
}

// viewerNotes is the live chat's per-viewer memory: the lines of earlier
// chat in which the viewer spoke, as the character's long-term recall
// ranks them for the viewer's name.
type viewerNotes struct {
	recall *recall.Service
	conf   string
	budget int
}

func (v viewerNotes) About(ctx context.Context, viewer string) (string, error) {
	b, err := v.recall.Recall(ctx, recall.Query{ConfUID: v.conf, Text: viewer, Budget: v.budget})
	if err != nil {
		return "", fmt.Errorf("recall about viewer %s: %w", viewer, err)
	}
	var said []string
	for _, mem := range b.Memories {
		for _, line := range strings.Split(mem.Text, "\n") {
			if mentions(line, viewer) {
				said = append(said, strings.TrimSpace(line))
			}
		}
	}
	return strings.Join(said, " / "), nil
}

// mentions reports whether line names viewer as a whole word, ignoring
// case.
func mentions(line, viewer string) bool {
	if viewer == "" {
		return false
	}
	l, v := strings.ToLower(line), strings.ToLower(viewer)
	for i := 0; ; {
		j := strings.Index(l[i:], v)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(v)
		prev, _ := utf8.DecodeLastRuneInString(l[:start])
		next, _ := utf8.DecodeRuneInString(l[end:])
		before := start == 0 || !isWordRune(prev)
		after := end == len(l) || !isWordRune(next)
		if before && after {
			return true
		}
		i = start + 1
	}
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }
