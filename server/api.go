package server

import (
	"context"
	"strings"

	"github.com/gofiber/fiber/v2"

	"koe/protocol"
)

// The REST API mirrors koe's memory and history messages for tools and
// scripts:
//
//	GET  /api/sessions                                   open sessions
//	GET  /api/sessions/:client_uid/memory                memory-state
//	PUT  /api/sessions/:client_uid/compression-rate      {"rate": 0.2}
//	GET  /api/sessions/:client_uid/context               the latest LLM call's exact context
//	GET  /api/characters/:conf_uid/prompts/:name         name = system | reminder
//	PUT  /api/characters/:conf_uid/prompts/:name         {"text": "..."} ("" = default)
//	GET  /api/histories/:conf_uid/:history_uid/messages  ?before=ID&limit=N
//	GET  /api/histories/:conf_uid/:history_uid/images/:ref
//	GET  /api/characters/:conf_uid/overlay               the overlay's pictures (overlay.go)
//
// the memories API (memories.go), the knowledge API (knowledge.go) and the
// chat API (chat.go).
func (s *Server) apiRoutes() {
	api := s.app.Group("/api")
	s.backupRoutes(api)
	api.Get("/sessions", func(c *fiber.Ctx) error {
		return c.JSON(s.opts.Sessions.List())
	})
	api.Get("/sessions/:client_uid/memory", s.withSession(func(c *fiber.Ctx, sess SessionState) error {
		return c.JSON(sess.MemoryState())
	}))
	api.Put("/sessions/:client_uid/compression-rate", s.withSession(func(c *fiber.Ctx, sess SessionState) error {
		var body struct {
			Rate *float64 `json:"rate"`
		}
		if err := decodeJSON(c, &body); err != nil {
			return err
		}
		if body.Rate == nil {
			return fiber.NewError(fiber.StatusBadRequest, `"rate" is missing`)
		}
		st, err := sess.SetCompressionRate(*body.Rate)
		if err != nil {
			return err
		}
		sess.Notify(st)
		return c.JSON(st)
	}))
	api.Get("/sessions/:client_uid/context", s.withSession(func(c *fiber.Ctx, sess SessionState) error {
		rep, err := sess.LastContext()
		if err != nil {
			return err
		}
		return c.JSON(rep)
	}))
	api.Get("/characters/:conf_uid/prompts/:name", func(c *fiber.Ctx) error {
		p, err := s.opts.Prompts.Prompt(c.UserContext(), c.Params("conf_uid"), c.Params("name"))
		if err != nil {
			return err
		}
		return c.JSON(promptBody(c, p.Text, p.Default))
	})
	api.Put("/characters/:conf_uid/prompts/:name", func(c *fiber.Ctx) error {
		var body struct {
			Text *string `json:"text"`
		}
		if err := decodeJSON(c, &body); err != nil {
			return err
		}
		if body.Text == nil {
			return fiber.NewError(fiber.StatusBadRequest, `"text" is missing ("" restores the default)`)
		}
		p, err := s.opts.Prompts.SetPrompt(c.UserContext(), c.Params("conf_uid"), c.Params("name"), *body.Text)
		if err != nil {
			return err
		}
		return c.JSON(promptBody(c, p.Text, p.Default))
	})
	api.Get("/histories/:conf_uid/:history_uid/messages", func(c *fiber.Ctx) error {
		before, limit, err := pageQuery(c)
		if err != nil {
			return err
		}
		page, err := s.opts.Histories.HistoryPage(c.UserContext(), c.Params("conf_uid"), c.Params("history_uid"), before, limit)
		if err != nil {
			return err
		}
		return c.JSON(page)
	})
	api.Get("/histories/:conf_uid/:history_uid/images/:ref", func(c *fiber.Ctx) error {
		mime, data, err := s.opts.Histories.Image(c.UserContext(), c.Params("conf_uid"), c.Params("history_uid"), c.Params("ref"))
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderContentType, mime)
		c.Set(fiber.HeaderCacheControl, "private, max-age=86400, immutable")
		return c.Send(data)
	})
	s.overlayAPI(api)
	s.memoryRoutes(api)
	s.knowledgeRoutes(api)
	s.chatRoutes(api)
	s.liveRoutes(api)
	s.sceneRoutes(api)
}

// SessionState is an open session as the REST API reads and tunes it.
type SessionState interface {
	MemoryState() protocol.MemoryState
	// SetCompressionRate changes the rate of the session's next
	// summaries; an error is for the client.
	SetCompressionRate(rate float64) (protocol.MemoryState, error)
	// Notify sends one of koe's events to the client, if it asked for them.
	Notify(msg any)
	// LastContext is the exact context of the session's latest LLM call.
	LastContext() (protocol.Context, error)
}

// Prompts are the characters' editable prompts (system, reminder).
type Prompts interface {
	// Prompt is the saved text, or the packaged default.
	Prompt(ctx context.Context, confUID, name string) (protocol.Prompt, error)
	// SetPrompt saves a prompt ("" restores the default) for every
	// session of the character, and returns it as Prompt does.
	SetPrompt(ctx context.Context, confUID, name, text string) (protocol.Prompt, error)
}

// Histories are the characters' stored conversations, as clients read
// them.
type Histories interface {
	// Histories lists a character's non-empty histories, newest first.
	Histories(ctx context.Context, confUID string) (protocol.HistoryList, error)
	// HistoryPage is up to limit messages older than message before (0:
	// the newest), oldest first.
	HistoryPage(ctx context.Context, confUID, historyUID string, before uint64, limit int) (protocol.HistoryPage, error)
	// ChatHistory is the same page as the chat API's messages, tool calls
	// and results included.
	ChatHistory(ctx context.Context, confUID, historyUID string, before uint64, limit int) (protocol.ChatHistory, error)
	// Image is an image of a history, by the reference its message holds.
	Image(ctx context.Context, confUID, historyUID, ref string) (mime string, data []byte, err error)
}

func promptBody(c *fiber.Ctx, text string, isDefault bool) fiber.Map {
	return fiber.Map{"conf_uid": c.Params("conf_uid"), "name": c.Params("name"), "text": text, "default": isDefault}
}

func (s *Server) withSession(h func(*fiber.Ctx, SessionState) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		sess := s.opts.Sessions.Find(c.Params("client_uid"))
		if sess == nil {
			return fiber.NewError(fiber.StatusNotFound, "no open session with that client_uid (GET /api/sessions lists them)")
		}
		return h(c, sess)
	}
}

func decodeJSON(c *fiber.Ctx, v any) error {
	if !strings.HasPrefix(c.Get(fiber.HeaderContentType), fiber.MIMEApplicationJSON) {
		return fiber.NewError(fiber.StatusUnsupportedMediaType, "send a JSON body (Content-Type: application/json)")
	}
	if err := c.BodyParser(v); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "invalid JSON body")
	}
	return nil
}
