package conversation

import (
	"context"
	"errors"
	"fmt"

	"koe"
	"koe/agent"
	"koe/histories"
	"koe/protocol"
)

// setHistory switches to history uid, rebuilds memory from it and returns
// its newest messages. A bad or unknown id changes nothing.
func (s *Session) setHistory(uid string) (protocol.HistoryData, error) {
	conf := s.Character().ConfUID
	records, err := s.loadHistory(conf, uid)
	if err != nil {
		return protocol.HistoryData{}, err
	}
	return histories.Data(conf, uid, records, s.deps.Config.HistoryMessages), nil
}

// loadHistory switches to history uid of conf and rebuilds memory from it.
// A bad or unknown id changes nothing.
func (s *Session) loadHistory(conf, uid string) ([]koe.Record, error) {
	if _, err := s.deps.Store.LastSeq(s.ctx, conf, uid); err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	// Read once the running turn has stopped: it may just have stored its
	// reply in this very history.
	s.turns.stop(errHistoryChanged)
	c, _ := s.current()
	records, seen, err := s.readMemory(c, conf, uid)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	prev := s.place
	s.place = place{uid: uid, used: true, seen: seen}
	s.mu.Unlock()
	if prev.uid != uid {
		s.dropIfUnused(conf, prev)
	}
	return records, nil
}

// readMemory rebuilds c's memory from the stored history uid and returns
// its records and the newest one's sequence number.
func (s *Session) readMemory(c cast, conf, uid string) ([]koe.Record, uint64, error) {
	records, err := s.deps.Store.Messages(s.ctx, conf, uid)
	if err != nil {
		return nil, 0, fmt.Errorf("load history: %w", err)
	}
	summaries, err := s.deps.Store.Summaries(s.ctx, conf, uid)
	if err != nil {
		s.log.Warn("could not load the history's summaries; they will be made again", "history_uid", uid, "err", err)
		summaries = nil
	}
	msgs, pending := toMemory(records)
	c.agent.Load(agent.Thread{ConfUID: conf, HistoryUID: uid}, msgs, summaries)
	for _, f := range pending {
		c.agent.AttachFile(f)
	}
	var seen uint64
	if len(records) > 0 {
		seen = records[len(records)-1].Seq
	}
	return records, seen, nil
}

// newHistory starts a fresh, empty history.
func (s *Session) newHistory() (string, error) {
	s.turns.stop(errHistoryChanged)
	c, _ := s.current()
	conf := c.char.ConfUID
	uid, err := s.deps.Store.Create(s.ctx, conf)
	if err != nil {
		return "", fmt.Errorf("create history: %w", err)
	}
	s.mu.Lock()
	prev := s.place
	s.place = place{uid: uid}
	s.mu.Unlock()
	s.dropIfUnused(conf, prev)
	c.agent.Load(agent.Thread{ConfUID: conf, HistoryUID: uid}, nil, nil)
	return uid, nil
}

// deleteHistory deletes history uid; deleting the current one empties
// memory. It reports whether the history existed.
func (s *Session) deleteHistory(uid string) (bool, error) {
	c, p := s.current()
	conf := c.char.ConfUID
	current := uid == p.uid
	if current {
		s.turns.stop(errHistoryChanged)
	}
	if err := s.deps.Store.Delete(s.ctx, conf, uid); err != nil {
		if errors.Is(err, koe.ErrNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("delete history: %w", err)
	}
	s.deps.forgotten(conf, uid)
	if current {
		s.mu.Lock()
		if s.place.uid == uid {
			s.place = place{}
		}
		s.mu.Unlock()
		c.agent.Load(agent.Thread{ConfUID: conf}, nil, nil)
	}
	return true, nil
}

// dropIfUnused deletes a history nothing was ever said in: the OLV client
// creates one on every connect, and without this the database would fill
// with empty histories.
func (s *Session) dropIfUnused(conf string, p place) {
	if p.uid == "" || p.used {
		return
	}
	// Also when the session is closing: that is when most are dropped.
	if err := s.deps.Store.Delete(context.WithoutCancel(s.ctx), conf, p.uid); err != nil && !errors.Is(err, koe.ErrNotFound) {
		s.log.Warn("could not delete unused history", "history_uid", p.uid, "err", err)
	}
}

// toMemory rebuilds the agent's messages from stored records. A turn's AI
// record holds everything said, cycles that called tools included; memory
// keeps what those cycles said with their calls, so the answer is the rest.
// Files ride with the user message after them; pending are the files
// attached after the last one.
func toMemory(records []koe.Record) (msgs []agent.Message, pending []agent.File) {
	msgs = make([]agent.Message, 0, len(records))
	said := "" // what this turn's tool cycles said, as the AI record has it
	for _, r := range records {
		switch {
		case r.Role == koe.RoleFile:
			pending = append(pending, fileOf(r))
		case r.StartsTurn():
			m := agent.Message{Role: agent.RoleUser, Content: r.Content, Files: pending}
			pending = nil
			for _, img := range r.Images {
				m.Images = append(m.Images, agent.Image{Source: img.Source, MimeType: img.MimeType, Data: img.Data})
			}
			msgs = append(msgs, m)
			said = ""
		case r.Role == koe.RoleToolCall:
			m := agent.Message{Role: agent.RoleAssistant, Content: r.Content}
			for _, c := range r.ToolCalls {
				m.ToolCalls = append(m.ToolCalls, agent.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
			}
			msgs = append(msgs, m)
			said = histories.JoinSaid(said, r.Content)
		case r.Role == koe.RoleTool:
			msgs = append(msgs, agent.Message{Role: agent.RoleTool, ToolCallID: r.ToolCallID, Name: r.Name, Content: r.Content})
		case r.Role == koe.RoleAI:
			text := histories.AfterSaid(r.Content, said)
			msgs = append(msgs, agent.Message{Role: agent.RoleAssistant, Content: text, Interrupted: r.Interrupted})
			said = ""
		}
	}
	return msgs, pending
}
