package chatcli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"koe/protocol"
)

// Bounds of /rate: the range memory.compression_rate allows, checked here
// so that a typo gets its answer before a turn is spent on it.
const (
	minRate = 0.1
	maxRate = 0.5
)

// lastMessages is how many messages /history shows of the history it
// switches to.
const lastMessages = 6

const help = `Type a message and press Enter to send it. Commands:
  /new              the next message starts a new history
  /history          list this character's histories, newest first
  /history <n|uid>  continue history n of the list (or the one with that uid)
  /rate <0.1-0.5>   compression rate of the summaries the next turns start
  /rate default     back to koe's configured rate
  /prompts          list the prompts of this character's MCP servers
  /prompt <n> [name=value …]  send prompt n of the list, filled in
  /help             this help
  /quit             leave (so do Ctrl-D, and Ctrl-C at the prompt)
Ctrl-C while koe answers stops the reply; a second Ctrl-C leaves it at once.
Start a message with // to send one that begins with /.`

// command runs one slash command.
func (c *chat) command(ctx context.Context, line string) error {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/quit", "/exit":
		return errQuit
	case "/help":
		c.say("%s", help)
	case "/new":
		c.history = ""
		c.say("The next message starts a new history.")
	case "/history":
		if arg == "" {
			return c.listHistories(ctx)
		}
		return c.pickHistory(ctx, arg)
	case "/rate":
		return c.setRate(arg)
	case "/prompts":
		return c.listPrompts(ctx)
	case "/prompt":
		return c.usePrompt(ctx, arg)
	default:
		return fmt.Errorf("unknown command %s (/help lists them)", name)
	}
	return nil
}

func (c *chat) setRate(arg string) error {
	switch arg {
	case "":
		if c.rate == nil {
			c.say("Compression rate: koe's configured one.")
		} else {
			c.say("Compression rate: %g.", *c.rate)
		}
		return nil
	case "default":
		c.rate = nil
		c.say("Compression rate: koe's configured one, from the next message on.")
		return nil
	}
	r, err := strconv.ParseFloat(arg, 64)
	if err != nil || math.IsNaN(r) || r < minRate || r > maxRate {
		return fmt.Errorf("the compression rate must be a number from %g to %g (the share of a conversation its summary keeps), not %q", minRate, maxRate, arg)
	}
	c.rate = &r
	c.say("Compression rate: %g, from the next message on.", r)
	return nil
}

// errNoCharacter: the histories of which character? Only an answer tells
// the default character's conf_uid.
var errNoCharacter = errors.New("no character yet: send a message first, or start koe chat with -character <conf_uid>")

func (c *chat) listHistories(ctx context.Context) error {
	if c.conf == "" {
		return errNoCharacter
	}
	list, err := c.api.Histories(ctx, c.conf)
	if err != nil {
		return errors.New(c.describe(err))
	}
	c.listed = c.listed[:0]
	if len(list) == 0 {
		c.say("No histories of %s yet.", c.conf)
		return nil
	}
	for i, h := range list {
		c.listed = append(c.listed, h.UID)
		mark := " "
		if h.UID == c.history {
			mark = "*"
		}
		latest := strings.Join(strings.Fields(h.LatestMessage.Content), " ")
		c.say("%s%3d  %s  %s  %s", mark, i+1, h.Timestamp, h.UID, shorten(latest, 60))
	}
	c.say("/history <n> continues one.")
	return nil
}

// pickHistory switches to history n of the last listing, or to the
// history with that uid.
func (c *chat) pickHistory(ctx context.Context, arg string) error {
	uid := arg
	if n, err := strconv.Atoi(arg); err == nil {
		if len(c.listed) == 0 {
			if err := c.listHistories(ctx); err != nil {
				return err
			}
		}
		if n < 1 || n > len(c.listed) {
			return fmt.Errorf("there is no history %d: /history lists %d", n, len(c.listed))
		}
		uid = c.listed[n-1]
	}
	return c.switchHistory(ctx, uid)
}

// switchHistory makes the next message continue history uid, and shows its
// last messages. Without a character yet, they show once it is known.
func (c *chat) switchHistory(ctx context.Context, uid string) error {
	if c.conf == "" {
		c.history = uid
		c.say("The next message continues history %s.", uid)
		return nil
	}
	h, err := c.api.History(ctx, c.conf, uid, 0, lastMessages)
	if err != nil {
		return errors.New(c.describe(err))
	}
	c.history = uid
	if h.More {
		c.say("…")
	}
	for _, m := range h.Messages {
		c.showStored(m)
	}
	c.say("The next message continues history %s.", uid)
	return nil
}

// showStored shows a message of a history as the turn showed it.
func (c *chat) showStored(m protocol.ChatMessage) {
	switch m.Type {
	case protocol.MessageHuman:
		c.say("%s%s", userPrompt, m.Content)
	case protocol.MessageAI:
		if m.Content != "" {
			c.say("%s%s", answerPrompt, m.Content)
		}
		for _, call := range m.ToolCalls {
			c.say("%s %s", markDone, callText(call))
		}
		if m.AdditionalKwargs.Interrupted {
			c.say("%s interrupted", markInterrupted)
		}
	case protocol.MessageTool:
		c.say("%s", markResult+result(&m))
	}
}
