package conversation

import (
	"context"
	"strings"

	"koe"
	"koe/internal/quote"
	"koe/protocol"
)

// groupChat is a chat API message posted into a group of clients: a
// round on it, which the request's stream follows as one more listener
// (it gets koe's events of every reply), and the members as always.
type groupChat struct {
	ctx  context.Context
	g    *Group
	name string
	text string
	out  Sender
}

// maxGroupNameRunes bounds the name a chat API message is said under: it
// goes into every character's prompt and the group's record.
const maxGroupNameRunes = 64

func (h *Hub) openGroupChat(ctx context.Context, req protocol.ChatRequest, out Sender) (*Chat, error) {
	switch {
	case req.ConfUID != "" || req.HistoryUID != "":
		return nil, invalid(`a group message names no character or history: the group's members answer, in the group's record`)
	case len(req.Images) > 0 || req.MCPPrompt != nil:
		return nil, invalid(`a group message carries text only ("message")`)
	case strings.TrimSpace(req.Message) == "":
		return nil, invalid(`"message" is empty: send some text`)
	}
	g := h.Group(req.GroupID)
	if g == nil || len(g.snapshot().members) < 2 {
		return nil, koe.Errorf(koe.NotFound, "no group has id %q (a group is named by \"group_\" and the client_uid of the client that made it)", quote.Shorten(req.GroupID, 80))
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name = "Guest"
	}
	if len([]rune(name)) > maxGroupNameRunes || strings.ContainsAny(name, "\n\r") {
		return nil, invalid(`"name" must be one line of at most %d characters`, maxGroupNameRunes)
	}
	return &Chat{group: &groupChat{ctx: ctx, g: g, name: name, text: req.Message, out: out}}, nil
}

// run posts the message and returns once the round has ended. The error
// is how its replies failed, as a one-client chat's is its turn's
// failure; the stream got each as an error event too.
func (c *groupChat) run() error {
	r, err := c.g.say(c.ctx, nil, c.name, c.text, []Listener{{Out: c.out, KoeEvents: true}})
	if err != nil {
		return err
	}
	<-r.done
	return r.err
}
