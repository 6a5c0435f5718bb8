package conversation

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"koe"
	"koe/agent"
	"koe/internal/quote"
	"koe/knowledge"
	"koe/protocol"
)

// Files attached to a conversation are stored as records of their own
// (role "file") at the point they were attached, with their text, so
// that the history replays them where they belong. Meta keys:
const (
	metaDocument = "document" // the file's number in its history
	metaTitle    = "title"
	metaFormat   = "format"
	metaMime     = "mime"
	metaTokens   = "tokens"
	metaBytes    = "bytes"
)

// fileOf is a stored file as memory holds it.
func fileOf(r koe.Record) agent.File {
	n, _ := strconv.Atoi(r.Meta[metaDocument])
	tokens, _ := strconv.Atoi(r.Meta[metaTokens])
	return agent.File{Number: n, Name: r.Name, Title: r.Meta[metaTitle], Text: r.Content, Tokens: tokens}
}

// fileRecord is a file read for a history, numbered.
func fileRecord(f knowledge.File, number int) koe.Record {
	return koe.Record{Role: koe.RoleFile, Name: f.Name, Content: f.Text, Meta: map[string]string{
		metaDocument: strconv.Itoa(number), metaTitle: f.Title, metaFormat: f.Format, metaMime: f.Mime,
		metaTokens: strconv.Itoa(f.Tokens), metaBytes: strconv.Itoa(f.Bytes),
	}}
}

func attachedFile(f knowledge.File, number int) protocol.AttachedFile {
	return protocol.AttachedFile{Document: number, Name: f.Name, Title: f.Title, Format: f.Format, Bytes: f.Bytes, Tokens: f.Tokens}
}

// errTurnRunning refuses a file while a reply is being made in the
// history: the file would land in the middle of the turn.
var errTurnRunning = koe.Errorf(koe.Conflict, "a reply is being made in this history; attach the file when it is done (or interrupt it)")

// heldUnknown: the coordinator could not say whether a turn runs, because
// of cause.
func heldUnknown(cause error) error {
	return &koe.Error{Kind: koe.Unavailable, Err: &hiddenCause{
		msg:   "koe could not check whether a reply is being made in this history: the coordination service is unreachable; the reason is in its log",
		cause: cause,
	}}
}

// turnDone refuses a file while a reply is being made in history uid, in
// this process or, with a shared coordinator, on another instance. A turn
// of this process that has told its client the chain is over is waited
// for: it only has to let the history go, and a client that attaches
// right after the reply must not be refused.
func (h *Hub) turnDone(ctx context.Context, uid string) error {
	if t := h.running.running(uid); t != nil {
		if !t.finishing.Load() {
			return errTurnRunning
		}
		select {
		case <-t.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	held, err := h.coord.Held(ctx, uid)
	if err != nil {
		h.log.Error("could not ask the coordinator whether a turn runs in the history", "history_uid", uid, "err", err)
		return heldUnknown(err)
	}
	if held {
		return errTurnRunning
	}
	return nil
}

// errNoKnowledge: koe was built without a knowledge service.
var errNoKnowledge = koe.Errorf(koe.Unavailable, "koe runs without files and documents")

// attachFile attaches a file (base64 in data) to the session's history at
// this point; the model reads it from the next message on. A refused file
// is told as file-refused and nothing of it is kept.
func (s *Session) attachFile(name, mime, data string) error {
	if s.deps.Knowledge == nil {
		return errNoKnowledge
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return invalid("attach-file: data is not base64: %s", quote.Shorten(err.Error(), 80))
	}
	c, p := s.current()
	if p.uid != "" {
		if err := s.hub.turnDone(s.ctx, p.uid); err != nil {
			return err
		}
	}
	f, err := s.deps.Knowledge.ReadFile(s.ctx, knowledge.Upload{Name: name, Mime: mime, Data: raw}, c.agent.CountTokens, c.agent.FileRoom())
	var refused *knowledge.FileError
	if errors.As(err, &refused) {
		s.reply(protocol.FileRefused{Type: protocol.TypeFileRefused, Filename: refused.Filename, Reason: refused.Reason, Kind: string(refused.Kind)})
		return nil
	}
	if err != nil {
		return fmt.Errorf("read attached file: %w", err)
	}
	number := c.agent.NextFileNumber()
	rec := fileRecord(f, number)
	conf := c.char.ConfUID
	s.mu.Lock()
	if s.cast.agent != c.agent || s.place.uid != p.uid {
		s.mu.Unlock()
		return koe.Errorf(koe.Conflict, "the character or history changed while the file was read; attach it again")
	}
	fresh := s.place.uid == ""
	if fresh {
		s.place.uid = koe.NewHistoryUID(time.Now())
	}
	s.place.used = true
	uid := s.place.uid
	s.mu.Unlock()
	if fresh {
		err = s.deps.Store.CreateWith(s.ctx, conf, uid, rec)
		c.agent.SetThread(agent.Thread{ConfUID: conf, HistoryUID: uid})
	} else {
		err = s.deps.Store.Append(s.ctx, conf, uid, rec)
	}
	if err != nil {
		return fmt.Errorf("store attached file: %w", err)
	}
	c.agent.AttachFile(fileOf(rec))
	if seq, err := s.deps.Store.LastSeq(s.ctx, conf, uid); err == nil {
		s.mu.Lock()
		if s.place.uid == uid {
			s.place.seen = seq
		}
		s.mu.Unlock()
	}
	s.reply(protocol.FileAttached{Type: protocol.TypeFileAttached, HistoryUID: uid, File: attachedFile(f, number)})
	return nil
}

// AttachFile attaches a file to a stored history (the REST route): the
// sessions that have it open read it at their next turn, as they read any
// record stored elsewhere. The room is what a fresh agent of the
// character leaves for a file.
func (h *Hub) AttachFile(ctx context.Context, conf, uid string, u knowledge.Upload) (protocol.AttachedFile, error) {
	if h.deps.Knowledge == nil {
		return protocol.AttachedFile{}, errNoKnowledge
	}
	if !koe.ValidID(conf) || !koe.ValidID(uid) {
		return protocol.AttachedFile{}, fmt.Errorf("attach a file: %w", koe.ErrInvalidID)
	}
	char, ok := h.deps.Characters.Find(conf)
	if !ok {
		return protocol.AttachedFile{}, koe.Errorf(koe.NotFound, "no character has conf_uid %q", conf)
	}
	records, err := h.deps.Store.Messages(ctx, conf, uid)
	if err != nil {
		return protocol.AttachedFile{}, fmt.Errorf("attach a file: %w", err)
	}
	if err := h.turnDone(ctx, uid); err != nil {
		return protocol.AttachedFile{}, err
	}
	number := 1
	for _, r := range records {
		if r.Role == koe.RoleFile {
			number++
		}
	}
	a := h.deps.sizingAgent(char)
	defer a.Close()
	f, err := h.deps.Knowledge.ReadFile(ctx, u, a.CountTokens, a.FileRoom())
	if err != nil {
		return protocol.AttachedFile{}, err
	}
	if err := h.deps.Store.Append(ctx, conf, uid, fileRecord(f, number)); err != nil {
		return protocol.AttachedFile{}, fmt.Errorf("store attached file: %w", err)
	}
	return attachedFile(f, number), nil
}

// sizingAgent is an agent of the character that never talks: it sizes
// files and counts tokens as the character's own would.
func (d *Deps) sizingAgent(char Character) *agent.Agent {
	return agent.New(agent.Options{
		Model: char.LLM.Model, ContextWindow: char.LLM.ContextWindow, Memory: char.Memory,
		Persona: char.Persona, CharacterName: char.Name, HumanName: char.HumanName,
		Tools: d.toolbox(char, nil), Logger: d.Logger,
	})
}

// IngestNotice tells the sessions of character conf that asked for koe's
// events how the indexing of a document added to its knowledge base goes,
// as status messages.
func (h *Hub) IngestNotice(conf string, n knowledge.Notice) {
	body := protocol.StatusBody{TaskID: n.Task, State: protocol.StatusProgress, Content: fmt.Sprintf("Indexing %s: %d%%", n.File, n.Percent)}
	switch n.Stage {
	case "reading":
		body.State, body.Content = protocol.StatusStart, "Reading "+n.File
	case "done":
		body.State, body.Content = protocol.StatusEnd, fmt.Sprintf("Indexed %s", n.File)
	case knowledge.StageFailed:
		body.State, body.Content, body.ErrorDetails = protocol.StatusError, "Could not index "+n.File, n.Reason
	}
	h.notifyCharacter(conf, protocol.Status{Type: protocol.TypeStatus, Content: body})
}

// notifyCharacter sends msg to the sessions talking with the character
// that asked for koe's events.
func (h *Hub) notifyCharacter(conf string, msg any) {
	for _, s := range h.openSessions() {
		if s.Character().ConfUID == conf {
			s.Notify(msg)
		}
	}
}
