package conversation

import (
	"context"
	"koe"
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
	// context.TODO: its callers (a cast's building, prompts' news) take
	// no context yet.
	text, _, err := h.deps.Store.Prompt(context.TODO(), confUID, name)
	if err != nil {
		h.log.Warn("could not read a saved prompt; using the default", "conf_uid", confUID, "prompt", name, "err", err)
		return ""
	}
	return text
}
