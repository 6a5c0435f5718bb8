package conversation

import (
	"context"
	"strings"
	"sync"

	"koe"
	"koe/internal/quote"
	"koe/protocol"
)

// Chat is one chat API turn, ready to run on a session of its own.
type Chat struct {
	s     *Session
	in    turnInput
	close sync.Once
	// group, if set, is the group the message goes to (group_chat.go);
	// s is then nil.
	group *groupChat
}

// OpenChat checks req and readies its turn: the character, the history
// and its memory, on a text-only session (no speech, koe's events) that
// sends to out; which events reach the client (stream_tokens) is out's
// business. ctx bounds the turn: the client's request. The turn runs
// through the same code as a WebSocket client's, and a history can be
// continued from either. Errors are for the client (see Explain).
func (h *Hub) OpenChat(ctx context.Context, req protocol.ChatRequest, out Sender) (*Chat, error) {
	if req.GroupID != "" {
		return h.openGroupChat(ctx, req, out)
	}
	char := h.deps.Characters.Default()
	if req.ConfUID != "" {
		var ok bool
		if char, ok = h.deps.Characters.Find(req.ConfUID); !ok {
			return nil, koe.Errorf(koe.NotFound, "no character has conf_uid %q", quote.Shorten(req.ConfUID, 80))
		}
	}
	imgs, err := validateImages(req.Images, h.deps.Config)
	if err != nil {
		return nil, err
	}
	if req.MCPPrompt != nil {
		if req.Message != "" {
			return nil, invalid(`send "message" or "mcp_prompt", not both`)
		}
		if req.Message, err = h.deps.mcpPromptText(ctx, char, *req.MCPPrompt); err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(req.Message) == "" && len(imgs) == 0 {
		return nil, invalid(`"message" is empty: send some text or an image`)
	}
	if h.isClosed() {
		return nil, errHubClosed
	}
	s := newSession(ctx, h, out, SessionOptions{ClientUID: newRunID(), KoeEvents: true, TextOnly: true}, char)
	h.applyPrompts(s.cast)
	s.asks.none = true // nobody can answer a question mid-turn (ask.go)
	c := &Chat{s: s, in: turnInput{text: req.Message, images: imgs}}
	if req.CompressionRate != nil {
		if _, err := s.SetCompressionRate(*req.CompressionRate); err != nil {
			c.Close()
			return nil, err
		}
	}
	if req.HistoryUID != "" {
		if _, err := s.loadHistory(char.ConfUID, req.HistoryUID); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Run runs the turn and returns once it has ended and its records are
// stored, then closes the chat's session. The error is the turn's failure
// (the LLM's, say), worded for the client by Explain; a turn stopped or
// cancelled (ctx) is no failure.
func (c *Chat) Run() error {
	if c.group != nil {
		return c.group.run()
	}
	t := c.s.start(c.in)
	if t == nil { // a chat's session is never drained; the server refuses chats instead
		c.Close()
		return koe.ErrRestarting
	}
	<-t.done
	c.Close()
	return t.err
}

// Close gives up a chat that will not run; after Run it does nothing more.
func (c *Chat) Close() {
	if c.s != nil {
		c.close.Do(c.s.Close)
	}
}

func (h *Hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}
