package conversation

import (
	"errors"
	"fmt"

	"koe/agent"
	"koe/history"
	"koe/protocol"
)

// prompt reads a saved prompt of a character ("" when none or unreadable).
func (s *Session) prompt(confUID, name string) string {
	text, _, err := s.deps.Store.Prompt(confUID, name)
	if err != nil {
		s.log.Warn("could not read a saved prompt; using the default", "prompt", name, "err", err)
		return ""
	}
	return text
}

// MemoryState is the memory as the user sees it.
func (s *Session) MemoryState() protocol.MemoryState {
	return protocol.MemoryState{Type: protocol.TypeMemoryState, MemoryState: s.currentAgent().State()}
}

// sendMemoryState tells the client about the memory: after every turn,
// every new summary and every history switch.
func (s *Session) sendMemoryState() {
	s.send(s.ctx, s.MemoryState())
}

// SetCompressionRate changes the rate of this session's next summaries.
func (s *Session) SetCompressionRate(rate float64) error {
	return s.currentAgent().SetCompressionRate(rate)
}

// LastContext is the exact context of the session's latest LLM call.
func (s *Session) LastContext() (*agent.ContextReport, error) {
	rep := s.currentAgent().LastContext()
	if rep == nil {
		return nil, errors.New("there has been no LLM call in this session yet")
	}
	return rep, nil
}

// Prompt names users can edit.
var editablePrompts = map[string]bool{history.PromptSystem: true, history.PromptReminder: true}

// PromptText returns the character's prompt name and whether it is the
// default (not saved by the user).
func (s *Session) PromptText(name string) (string, bool, error) {
	if !editablePrompts[name] {
		return "", false, fmt.Errorf("unknown prompt %q", name)
	}
	text, ok, err := s.deps.Store.Prompt(s.Character().ConfUID, name)
	if err != nil {
		return "", false, err
	}
	if !ok && name == history.PromptSystem {
		return agent.DefaultSystemPrompt, true, nil
	}
	return text, !ok, nil
}

// SetPromptText saves the character's prompt name ("" restores the
// default) and applies it from the next LLM call on.
func (s *Session) SetPromptText(name, text string) error {
	if !editablePrompts[name] {
		return fmt.Errorf("unknown prompt %q", name)
	}
	if err := s.deps.Store.SetPrompt(s.Character().ConfUID, name, text); err != nil {
		return err
	}
	s.ApplyPrompts()
	return nil
}

// ApplyPrompts reloads the character's saved prompts into the agent, e.g.
// after another session or the REST API changed them.
func (s *Session) ApplyPrompts() {
	conf := s.Character().ConfUID
	a := s.currentAgent()
	a.SetSystemPrompt(s.prompt(conf, history.PromptSystem))
	a.SetReminder(s.prompt(conf, history.PromptReminder))
}
