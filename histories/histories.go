// Package histories serves what koe keeps of a character's conversations,
// besides the sessions that talk in them: the list of its histories,
// their pages (as history messages and as the chat API's messages), their
// images, and the character's saved prompts. The WebSocket's requests
// (through conversation) and the REST routes (through server) read them
// here, so both transports show the same thing.
//
// It is not package history, which stores them (the store contract):
// this package words what is stored for clients, the protocol's shapes,
// and also gives conversation the shapes its turns send of the records
// they store (wire.go).
package histories

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"koe"
	"koe/agent"
	"koe/internal/quote"
	"koe/protocol"
)

// Store is where the histories and prompts are (the history store).
type Store interface {
	List(ctx context.Context, confUID string) ([]koe.ListedHistory, error)
	// Page reads limit records older than sequence before (0: the end),
	// oldest first, without image bytes; more says older ones exist.
	Page(ctx context.Context, confUID, historyUID string, before uint64, limit int) (records []koe.Record, more bool, err error)
	Image(ctx context.Context, confUID, historyUID, ref string) (mime string, data []byte, err error)
	Prompt(ctx context.Context, confUID, name string) (text string, saved bool, err error)
	SetPrompt(ctx context.Context, confUID, name, text string) error
}

// Characters say which characters are configured.
type Characters interface {
	Has(confUID string) bool
}

// News tells the other koe instances sharing the store of a change (coord's
// Bus).
type News interface {
	Publish(ctx context.Context, topic, payload string) error
}

// NewsPrompts is the News topic of a saved prompt; the payload is the
// character's conf_uid.
const NewsPrompts = "prompts"

// newsTimeout bounds telling the other instances of a change.
const newsTimeout = 5 * time.Second

// Options are what a Service is built from.
type Options struct {
	Store      Store
	Characters Characters
	// PageLimit bounds a page a client asks for
	// (conversation.history_messages).
	PageLimit int
	// Saved is told of every prompt saved here: the open sessions of the
	// character take it up (the hub's PromptsChanged).
	Saved func(confUID string)
	// News, if set, tells the other instances of a saved prompt.
	News   News
	Logger *slog.Logger
}

// Service serves the characters' histories and prompts. Its methods are
// safe for concurrent use; its errors are *koe.Errors worded for the
// client, the store's, or koe's own.
type Service struct {
	opts Options
	log  *slog.Logger
}

// New makes the service.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Saved == nil {
		opts.Saved = func(string) {}
	}
	return &Service{opts: opts, log: opts.Logger}
}

// List lists a character's non-empty histories, newest first.
func (s *Service) List(ctx context.Context, conf string) (protocol.HistoryList, error) {
	list, err := s.opts.Store.List(ctx, conf)
	if err != nil {
		return protocol.HistoryList{}, fmt.Errorf("list histories: %w", err)
	}
	out := protocol.HistoryList{Type: protocol.TypeHistoryList, Histories: make([]protocol.HistoryEntry, 0, len(list))}
	for _, h := range list {
		out.Histories = append(out.Histories, protocol.HistoryEntry{UID: h.UID, LatestMessage: recordMessage(conf, h.UID, h.LatestMessage), Timestamp: h.Timestamp, Title: Title(h.Opening)})
	}
	return out, nil
}

// Histories is List for a client that names the character: a conf_uid
// that is no character's and has no histories is not found.
func (s *Service) Histories(ctx context.Context, conf string) (protocol.HistoryList, error) {
	list, err := s.List(ctx, conf)
	if err == nil && len(list.Histories) == 0 && !s.opts.Characters.Has(conf) {
		return protocol.HistoryList{}, koe.Errorf(koe.NotFound, "no character has conf_uid %q", quote.Shorten(conf, 80))
	}
	return list, err
}

// page reads up to limit (at most the page limit) records of a history
// older than record before (0: the newest).
func (s *Service) page(ctx context.Context, conf, uid string, before uint64, limit int) ([]koe.Record, bool, error) {
	if limit <= 0 || limit > s.opts.PageLimit {
		limit = s.opts.PageLimit
	}
	return s.opts.Store.Page(ctx, conf, uid, before, limit)
}

// HistoryPage returns up to limit messages of a history older than
// message before (0: the newest), oldest first, and whether older ones
// exist.
func (s *Service) HistoryPage(ctx context.Context, conf, uid string, before uint64, limit int) (protocol.HistoryPage, error) {
	records, more, err := s.page(ctx, conf, uid, before, limit)
	if err != nil {
		return protocol.HistoryPage{}, fmt.Errorf("read history page: %w", err)
	}
	return protocol.HistoryPage{Type: protocol.TypeHistoryPage, HistoryUID: uid, Messages: visibleRecords(conf, uid, records), More: more}, nil
}

// ChatHistory reads up to limit records of a history older than record
// before (0: the newest) as the chat API's messages, tool calls and
// results included.
func (s *Service) ChatHistory(ctx context.Context, conf, uid string, before uint64, limit int) (protocol.ChatHistory, error) {
	records, more, err := s.page(ctx, conf, uid, before, limit)
	if err != nil {
		return protocol.ChatHistory{}, fmt.Errorf("read history: %w", err)
	}
	out := protocol.ChatHistory{ConfUID: conf, HistoryUID: uid, Messages: []protocol.ChatMessage{}, More: more}
	said := "" // what the turn's tool cycles said, which its AI record repeats
	for _, r := range records {
		var m protocol.ChatMessage
		switch {
		case r.Role == koe.RoleHuman:
			m = protocol.ChatMessage{Type: protocol.MessageHuman, Content: r.Content, Name: r.Name}
			for _, img := range r.Images {
				m.AdditionalKwargs.Images = append(m.AdditionalKwargs.Images, protocol.HistoryImage{Source: img.Source, MimeType: img.MimeType, URL: ImagePath(conf, uid, img.Ref)})
			}
			said = ""
		case r.Role == koe.RoleToolCall:
			m = ToolCallMessage(r, "", protocol.ResponseMetadata{})
			said = JoinSaid(said, r.Content)
		case r.Role == koe.RoleTool:
			m = ToolResultMessage(r, "")
			if strings.HasPrefix(r.Content, "Error: ") {
				m.Status = protocol.ToolFailed
			}
		case r.Role == koe.RoleAI:
			m = protocol.ChatMessage{Type: protocol.MessageAI, Content: AfterSaid(r.Content, said), Name: r.Name}
			m.AdditionalKwargs.Interrupted = r.Interrupted
			said = ""
		default:
			continue // metadata, proactive instructions
		}
		m.AdditionalKwargs.ID, m.AdditionalKwargs.Timestamp = r.Seq, r.Timestamp
		out.Messages = append(out.Messages, m)
	}
	return out, nil
}

// Image returns an image of a history by the reference its message holds.
func (s *Service) Image(ctx context.Context, conf, uid, ref string) (mime string, data []byte, err error) {
	mime, data, err = s.opts.Store.Image(ctx, conf, uid, ref)
	if err != nil {
		return "", nil, fmt.Errorf("read image: %w", err)
	}
	return mime, data, nil
}

// Prompt names users can edit, and the message type of each.
var editablePrompts = map[string]string{
	koe.PromptSystem:   protocol.TypeSystemPrompt,
	koe.PromptReminder: protocol.TypeReminder,
}

// Prompt returns a character's editable prompt as the client sees it: the
// saved text, or the packaged default (Default set) when none is saved.
// Both transports answer with this, so they show the same text.
func (s *Service) Prompt(ctx context.Context, confUID, name string) (protocol.Prompt, error) {
	typ, ok := editablePrompts[name]
	if !ok {
		return protocol.Prompt{}, koe.Errorf(koe.NotFound, "there is no prompt %q: prompts are named system or reminder", name)
	}
	if !s.opts.Characters.Has(confUID) {
		return protocol.Prompt{}, koe.Errorf(koe.NotFound, "no character has that conf_uid")
	}
	text, saved, err := s.opts.Store.Prompt(ctx, confUID, name)
	if err != nil {
		return protocol.Prompt{}, fmt.Errorf("read prompt: %w", err)
	}
	if !saved && name == koe.PromptSystem {
		text = agent.DefaultSystemPrompt
	}
	return protocol.Prompt{Type: typ, Text: text, Default: !saved}, nil
}

// SetPrompt saves a character's prompt ("" restores the default); every
// open session of the character, here and on the other instances, uses it
// from its next LLM call on. It returns the prompt as Prompt does.
func (s *Service) SetPrompt(ctx context.Context, confUID, name, text string) (protocol.Prompt, error) {
	if _, err := s.Prompt(ctx, confUID, name); err != nil {
		return protocol.Prompt{}, err
	}
	if err := s.opts.Store.SetPrompt(ctx, confUID, name, text); err != nil {
		return protocol.Prompt{}, fmt.Errorf("save prompt: %w", err)
	}
	s.opts.Saved(confUID)
	if s.opts.News != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), newsTimeout)
		err := s.opts.News.Publish(ctx, NewsPrompts, confUID)
		cancel()
		if err != nil {
			s.log.Warn("the other instances were not told of a saved prompt; their open sessions of the character keep the old one until they reopen", "conf_uid", confUID, "err", err)
		}
	}
	return s.Prompt(ctx, confUID, name)
}
