package conversation

import (
	"context"
	"fmt"
	"time"

	"koe"
	"koe/agent"
	"koe/protocol"
)

// MemoryState is the memory as the user sees it.
func (s *Session) MemoryState() protocol.MemoryState {
	c, _ := s.current()
	return memoryStateMessage(c.agent.State())
}

// SetCompressionRate changes the rate of this session's next summaries.
func (s *Session) SetCompressionRate(rate float64) (protocol.MemoryState, error) {
	c, _ := s.current()
	if err := c.agent.SetCompressionRate(rate); err != nil {
		return protocol.MemoryState{}, refused(err)
	}
	return memoryStateMessage(c.agent.State()), nil
}

// Notify sends one of koe's events (memory-state after a change made over
// REST, say) to the client if it asked for koe's events.
func (s *Session) Notify(msg any) {
	if s.koeEvents {
		s.reply(msg)
	}
}

// LastContext is the exact context of the session's latest LLM call.
func (s *Session) LastContext() (protocol.Context, error) {
	c, _ := s.current()
	rep := c.agent.LastContext()
	if rep == nil {
		return protocol.Context{}, koe.Errorf(koe.NotFound, "there has been no LLM call in this session yet")
	}
	return contextMessage(rep), nil
}

// Prompt names users can edit, and the message type of each.
var editablePrompts = map[string]string{
	koe.PromptSystem:   protocol.TypeSystemPrompt,
	koe.PromptReminder: protocol.TypeReminder,
}

// Prompt returns a character's editable prompt as the client sees it: the
// saved text, or the packaged default (Default set) when none is saved.
// Both transports answer with this, so they show the same text.
func (h *Hub) Prompt(confUID, name string) (protocol.Prompt, error) {
	typ, ok := editablePrompts[name]
	if !ok {
		return protocol.Prompt{}, koe.Errorf(koe.NotFound, "there is no prompt %q: prompts are named system or reminder", name)
	}
	if !h.deps.Characters.Has(confUID) {
		return protocol.Prompt{}, koe.Errorf(koe.NotFound, "no character has that conf_uid")
	}
	// context.TODO: the hub's methods behind the REST routes take no
	// context yet; their requests' will do.
	text, saved, err := h.deps.Store.Prompt(context.TODO(), confUID, name)
	if err != nil {
		return protocol.Prompt{}, fmt.Errorf("read prompt: %w", err)
	}
	if !saved && name == koe.PromptSystem {
		text = agent.DefaultSystemPrompt
	}
	return protocol.Prompt{Type: typ, Text: text, Default: !saved}, nil
}

// SetPrompt saves a character's prompt ("" restores the default) and
// applies it to every open session of that character from its next LLM
// call on. It returns the prompt as Prompt does.
func (h *Hub) SetPrompt(confUID, name, text string) (protocol.Prompt, error) {
	if _, err := h.Prompt(confUID, name); err != nil {
		return protocol.Prompt{}, err
	}
	if err := h.deps.Store.SetPrompt(context.TODO(), confUID, name, text); err != nil {
		return protocol.Prompt{}, fmt.Errorf("save prompt: %w", err)
	}
	h.PromptsChanged(confUID)
	if h.deps.News != nil {
		ctx, cancel := context.WithTimeout(context.Background(), newsTimeout)
		err := h.deps.News.Publish(ctx, NewsPrompts, confUID)
		cancel()
		if err != nil {
			h.log.Warn("the other instances were not told of a saved prompt; their open sessions of the character keep the old one until they reopen", "conf_uid", confUID, "err", err)
		}
	}
	return h.Prompt(confUID, name)
}

// NewsPrompts is the News topic of a saved prompt; the payload is the
// character's conf_uid.
const NewsPrompts = "prompts"

// newsTimeout bounds telling the other instances of a change.
const newsTimeout = 5 * time.Second

// PromptsChanged gives the open sessions of character confUID the
// prompts saved for it now (saved here, or by another instance: its news
// calls this). confUID "" means every character (news may have been
// missed).
func (h *Hub) PromptsChanged(confUID string) {
	type prompts struct{ system, reminder string }
	read := map[string]prompts{} // each character's, read once
	for _, s := range h.openSessions() {
		c, _ := s.current()
		conf := c.char.ConfUID
		if confUID != "" && conf != confUID {
			continue
		}
		p, ok := read[conf]
		if !ok {
			p = prompts{h.savedPrompt(conf, koe.PromptSystem), h.savedPrompt(conf, koe.PromptReminder)}
			read[conf] = p
		}
		c.agent.SetSystemPrompt(p.system)
		c.agent.SetReminder(p.reminder)
	}
}

// applyPrompts gives a cast's agent the prompts saved for its character
// now: a cast built while a prompt was being saved may have read the old
// one, and SetPrompt reaches only casts already in place.
func (h *Hub) applyPrompts(c cast) {
	c.agent.SetSystemPrompt(h.savedPrompt(c.char.ConfUID, koe.PromptSystem))
	c.agent.SetReminder(h.savedPrompt(c.char.ConfUID, koe.PromptReminder))
}

// savedPrompt reads a prompt the user saved ("" when none or unreadable:
// the agent then uses its default).
func (h *Hub) savedPrompt(confUID, name string) string {
	text, _, err := h.deps.Store.Prompt(context.TODO(), confUID, name)
	if err != nil {
		h.log.Warn("could not read a saved prompt; using the default", "conf_uid", confUID, "prompt", name, "err", err)
		return ""
	}
	return text
}
