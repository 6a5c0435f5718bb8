package livechat

import (
	"strings"
)

// The streamer's commands, as the chat names them once configured.
const (
	CommandSkip   = "skip"
	CommandPause  = "pause"
	CommandResume = "resume"
	CommandClear  = "clear"
	CommandBan    = "ban"
	CommandUnban  = "unban"
)

// Command is a streamer's command typed in the chat by a moderator or the
// broadcaster. Name is one of the Command* constants whatever the
// configured word; Arg is the word after it (the viewer of ban and
// unban), By who typed it.
type Command struct {
	Name, Arg, By string
}

// commandQueue bounds the commands waiting for their consumer; a chat
// typing more than this between two of them is not a streamer's.
const commandQueue = 16

type commandName struct{ key, name string }

// names lists each command's key with its configured word.
func (c CommandsConfig) names() []commandName {
	return []commandName{
		{CommandSkip, c.Skip}, {CommandPause, c.Pause}, {CommandResume, c.Resume},
		{CommandClear, c.Clear}, {CommandBan, c.Ban}, {CommandUnban, c.Unban},
	}
}

// parse reads text as a command: the prefix, a configured word (any
// case), then its argument. ok is false for anything else, a message.
func (c CommandsConfig) parse(text string) (cmd Command, ok bool) {
	if c.Prefix == "" || !strings.HasPrefix(text, c.Prefix) {
		return Command{}, false
	}
	fields := strings.Fields(text[len(c.Prefix):])
	if len(fields) == 0 {
		return Command{}, false
	}
	for _, n := range c.names() {
		if n.name != "" && strings.EqualFold(fields[0], n.name) {
			cmd.Name = n.key
			if len(fields) > 1 {
				cmd.Arg = strings.TrimPrefix(fields[1], "@")
			}
			return cmd, true
		}
	}
	return Command{}, false
}

// Commands delivers the commands moderators and the broadcaster type in
// the chat; the live chat's owner runs them as it runs the streamer's
// (so that, with several instances, they act where the chat runs).
func (r *Runner) Commands() <-chan Command { return r.commands }

// command hands a moderator's command to its consumer, without waiting.
func (r *Runner) command(cmd Command) {
	select {
	case r.commands <- cmd:
		r.log.Info("live chat: command from the chat", "command", cmd.Name, "arg", cmd.Arg, "by", cmd.By)
	default:
		r.log.Warn("live chat: command from the chat not run: too many waiting", "command", cmd.Name, "by", cmd.By, "waiting", commandQueue)
	}
}
